/*
 * coll_profiler.h - ABI of coll profiler plugins (version 1).
 *
 * A profiler plugin is a shared object named by COLL_PROFILER_PLUGIN=path.so
 * that exports `collProfiler_v1` (a collProfiler_v1_t). It is modelled on
 * NCCL's profiler plugin (ncclProfiler_v*: init with an activation mask,
 * startEvent / stopEvent / recordEventState on typed event descriptors,
 * finalize). coll calls it for:
 *
 *   collProfileGroup  one launch on one communicator: a blocking call, or the
 *                     operations of one collGroupEnd (or one stream item);
 *   collProfileColl   a collective inside it (barrier included), once its
 *                     algorithm is chosen; parentObj = the group's handle;
 *   collProfileP2p    a send or a receive of a launch; parentObj = the group;
 *   collProfileStep   one transfer on the wire (a pipeline slice of a schedule
 *                     step, or a slice of a send/recv): started when posted,
 *                     stopped when complete; parentObj = the coll or p2p.
 *
 * Order: on one communicator events nest as listed (a child starts after
 * and stops before its parent); steps of one operation overlap each other.
 *
 * Rules:
 *  - init is called once per communicator, at the end of its init, on the
 *    thread that created it; it sets *eActivationMask (a bitwise or of
 *    collProfile*; preset to collProfileGroup | collProfileColl |
 *    collProfileP2p) and *context. Only the event types in the mask are
 *    started. collProfileStep costs a call per transfer: leave it out
 *    unless you need it.
 *  - The other calls come from the thread that runs the communicator's
 *    operations (the caller of a blocking call, or the communicator's
 *    progress thread), never concurrently for one communicator; calls for
 *    different communicators may run at the same time on different threads.
 *  - startEvent writes an opaque handle to *eHandle (NULL: no stopEvent or
 *    recordEventState will follow for it); descriptor pointers (and the
 *    strings in them) are valid during the call only.
 *  - Sizes are in bytes, counts in elements; times are the plugin's to take.
 *  - A plugin that cannot be loaded, lacks the symbol or whose init fails
 *    makes collCommInitRank fail with collInvalidArgument (the message says
 *    why). Errors returned by the other calls are ignored.
 */
#ifndef COLL_PROFILER_PLUGIN_H_
#define COLL_PROFILER_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

#ifdef __cplusplus
extern "C" {
#endif

#define COLL_PROFILER_PLUGIN_VERSION 1
#define COLL_PROFILER_PLUGIN_SYMBOL "collProfiler_v1"

/* Event types (bit values, for the activation mask). */
enum {
  collProfileGroup = 1 << 0,
  collProfileColl = 1 << 1,
  collProfileP2p = 1 << 2,
  collProfileStep = 1 << 3
};

typedef struct {
  uint8_t type;    /* collProfileGroup, collProfileColl, ... */
  void* parentObj; /* handle the plugin gave the parent event, or NULL */
  int rank;        /* this rank in the communicator */
  union {
    struct {
      uint64_t seqNumber; /* launches on this communicator so far */
      int nops;           /* operations in the launch */
    } group;
    struct {
      uint64_t seqNumber; /* collectives on this communicator so far (equal on every rank) */
      const char* func;   /* "all-reduce", "all-gather", "reduce-scatter", "broadcast", "reduce", "barrier" */
      const void* sendBuff;
      void* recvBuff;
      size_t count;       /* elements as passed to the call */
      collDataType_t datatype;
      collRedOp_t op;
      int root;           /* broadcast / reduce; -1 otherwise */
      size_t bytes;       /* count x type size */
      const char* algo;   /* "ring", "tree", ..., "mailbox" */
      int nChannels;
      size_t chunkBytes;  /* bytes per block of a pipeline slice (0: mailbox) */
    } coll;
    struct {
      uint64_t seqNumber; /* send/recv batches on this communicator so far */
      const char* func;   /* "send" or "recv" */
      const void* buff;
      size_t count;
      collDataType_t datatype;
      int peer;
      size_t bytes;
      int nChannels;      /* channels its slices are striped over */
    } p2p;
    struct {
      int channel;
      int peer;
      int isSend;         /* 1: to peer, 0: from peer */
      size_t bytes;       /* payload of this transfer */
      int phase;          /* schedule phase (p2p: index of the op in its batch) */
      size_t slice;       /* pipeline slice (p2p: slice of the transfer) */
      const char* kind;   /* "send", "recv", "recv-reduce" */
    } step;
  };
} collProfilerEventDescr_v1_t;

typedef enum {
  /* a collective or p2p event's rank has been waiting (past the spin
   * time) on args->wait.peer; reported at most once per wait */
  collProfilerStateWaiting = 0
} collProfilerEventState_v1_t;

typedef union {
  struct {
    int peer;
  } wait;
} collProfilerEventStateArgs_v1_t;

typedef struct {
  const char* name;
  collResult_t (*init)(void** context, uint64_t commHash, int nranks, int rank, int nnodes, int* eActivationMask);
  collResult_t (*startEvent)(void* context, void** eHandle, const collProfilerEventDescr_v1_t* eDescr);
  collResult_t (*stopEvent)(void* eHandle);
  collResult_t (*recordEventState)(void* eHandle, collProfilerEventState_v1_t state,
                                   const collProfilerEventStateArgs_v1_t* args);
  /* Called once when the communicator is destroyed or aborted. */
  collResult_t (*finalize)(void* context);
} collProfiler_v1_t;

#ifdef __cplusplus
}
#endif

#endif
