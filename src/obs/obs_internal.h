/* obs_internal.h - shared by the files of src/obs (not the engine). */
#ifndef COLL_OBS_INTERNAL_H_
#define COLL_OBS_INTERNAL_H_

#include <stdio.h>

#include "coll_profiler.h"
#include "obs/obs.h"

/* A posted transfer, while it is in flight (trace and profiler). */
typedef struct {
  uint64_t postNs;
  void* handle; /* profiler step handle */
  size_t bytes, slice;
  int32_t peer, phase;
  uint8_t open, kind;
} collObsSlot;

typedef struct {
  collObsSlot* s;
  int cap;
} collObsChanSlots;

typedef struct {
  void* dl;
  const collProfiler_v1_t* ops;
  void* ctx;
  int mask;
} collObsProfiler;

struct collObsTrace; /* trace.c */

struct collObsEvents {
  struct collObsTrace* trace; /* NULL without COLL_TRACE_FILE */
  collObsProfiler prof;
  void* groupHandle;
  void* opHandle;   /* the running collective's */
  void** p2pHandles; /* [p2pCap] the running batch's ops */
  int p2pCap;
  uint64_t launchSeq, launchStartNs, opStartNs;
  int waitReported;
  collObsChanSlots ch[COLL_MAX_CHANNELS];
};

/* ---- obs_file.c ------------------------------------------------------------ */
/* Expands %h (host), %p (pid), %r (rank), %c (communicator id, 16 hex
 * digits, equal on every rank of one communicator) in spec. 0 if it does not
 * fit. */
int collObsPath(collComm_t comm, const char* spec, char* out, size_t len);
/* Opens the expanded path for writing (truncating); NULL with a WARN naming
 * the variable. */
FILE* collObsOpen(collComm_t comm, const char* spec, const char* var, char* used, size_t usedLen);
void collObsJsonStr(FILE* f, const char* s);
/* CLOCK_REALTIME - CLOCK_MONOTONIC in ns (to print monotonic times as wall clock). */
int64_t collObsRealtimeOffsetNs(void);
const char* collObsStateName(int state);

/* ---- stats.c ---------------------------------------------------------------- */
/* Writes the counters of comm as JSON to f (why: "destroy", "api"). */
void collObsWriteStats(collComm_t comm, FILE* f, const char* why);

/* ---- flightrec.c -------------------------------------------------------------- */
void collObsWriteFlightRecord(collComm_t comm, FILE* f, const char* why);
/* COLL_FR_FILE (stderr when toStderr and unset); 0 if nothing written. */
int collObsDumpFlightRecord(collComm_t comm, const char* path, const char* why, int toStderr);
/* Installs the COLL_FR_SIGNAL handler and its dumper thread once per process. */
void collObsSignalSetup(void);

/* ---- trace.c ------------------------------------------------------------------- */
struct collObsTrace* collObsTraceCreate(void);
void collObsTraceOp(struct collObsTrace* t, const collObsRecord* rec, uint64_t t0, uint64_t t1, int nops,
                    const collOp* ops);
void collObsTraceStep(struct collObsTrace* t, int ch, const collObsSlot* s, uint64_t t1, int unfinished);
void collObsTraceWrite(collComm_t comm, struct collObsTrace* t, FILE* f);
void collObsTraceFree(struct collObsTrace* t);

/* ---- profiler.c ------------------------------------------------------------------ */
collResult_t collObsProfilerLoad(collComm_t comm, collObsProfiler* p);
void collObsProfilerUnload(collObsProfiler* p);

#endif
