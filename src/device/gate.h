/*
 * gate.h - a counter in pinned host memory that CUDA streams wait on: the
 * building block for NCCL's stream semantics on a host-driven engine.
 *
 * A call on device buffers returns at once: the caller's stream gets
 * "wait until the gate reaches v" (cuStreamWaitValue32, executed by the GPU's
 * front end: neither the host nor an SM waits), and the progress thread opens
 * the gate to v (a plain store into host memory the GPU reads over PCIe)
 * once the call's data is in place. Later work on the stream then sees the
 * result. Values compare cyclically ((int32_t)(gate - v) >= 0), so the
 * counter may wrap. Where the driver refuses stream memory operations, the
 * wait falls back to a host function on the stream that polls the gate
 * (cuLaunchHostFunc; it occupies the driver's callback thread meanwhile).
 */
#ifndef COLL_DEVICE_GATE_H_
#define COLL_DEVICE_GATE_H_

#include <stdint.h>

#include "coll.h"

typedef struct collDevGate collDevGate;

/* Allocates a gate at value 0 in pinned, device-mapped host memory of the
 * current context. Errors: those of collCudaLoad, collInvalidArgument
 * (NULL), collSystemError (allocation). */
collResult_t collDevGateCreate(collDevGate** gate);

/* Enqueues on stream (a CUstream; NULL: the legacy default stream) a wait
 * until the gate reaches v. Never blocks the host. */
collResult_t collDevGateWait(collDevGate* gate, uint32_t v, void* stream);

/* Sets the gate to v (release store): streams waiting for v or less go on. */
void collDevGateOpen(collDevGate* gate, uint32_t v);

/* Value the gate holds now. */
uint32_t collDevGateValue(const collDevGate* gate);

/* 1 if waits use cuStreamWaitValue32, 0 if the host-function fallback. */
int collDevGateUsesMemOps(const collDevGate* gate);

/* Frees the gate; no stream may still wait on it. NULL is accepted. */
void collDevGateDestroy(collDevGate* gate);

#endif
