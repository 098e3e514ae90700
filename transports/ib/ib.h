/* ib.h - the InfiniBand verbs / RoCE transport (transports/ib/). */
#ifndef COLL_TRANSPORT_IB_H_
#define COLL_TRANSPORT_IB_H_

#include "coll_net.h"

/* Operations table of the "ib" transport (COLL_NET=ib). Semantics beyond
 * coll_net.h:
 *  - devices: the ACTIVE InfiniBand and RoCE ports that COLL_IB_HCA selects;
 *    init fails (collSystemError, with what to install) without libibverbs,
 *    and when no port is usable;
 *  - connect returns the send comm before the listener answered; the
 *    handshake completes in later calls (isend, test);
 *  - at most COLL_IB_MAX_REQUESTS requests in flight per comm: beyond that
 *    isend/irecv return collSuccess with *request = NULL (retry later);
 *  - a send of at most COLL_IB_EAGER_BYTES completes without the receiver
 *    having posted its receive for the first COLL_IB_MAX_REQUESTS messages
 *    (and whenever the receiver has caught up), and is done as soon as it is
 *    written out (its bytes copied); larger ones wait for the receiver;
 *  - test returning an error releases the request; once a comm failed, every
 *    later request on it fails the same way; a peer that exits or closes is
 *    an error within IB_CHECK_S of test calls;
 *  - getPollFd: listen and recv comms give one fd of the process that turns
 *    readable (POLLIN) on any completion, incoming connection or async event;
 *    send comms give -1 (a completion never makes an fd writable, and the
 *    engine waits on sends with POLLOUT) but arm their CQ: the engine then
 *    sleeps on its listen comm's fd, the same process fd (engine/progress.c);
 *  - regMr registers host memory through the device's registration cache
 *    (COLL_IB_REG_CACHE entries; the engine keeps its own, engine/reg.h,
 *    and passes its handles to isend/irecv; a NULL mhandle registers here);
 *  - GPU memory: getProperties adds COLL_PTR_CUDA | COLL_PTR_DMABUF when
 *    COLL_IB_DMABUF is 1, libibverbs has ibv_reg_dmabuf_mr, the device's
 *    kernel driver takes dma-bufs (probed once per device, as NCCL does:
 *    fd -1 gives EBADF, not EOPNOTSUPP/EPROTONOSUPPORT/ENOSYS) and the
 *    CUDA driver of this process exports them (device/dmabuf.h; a process
 *    that never mapped the CUDA driver is host-only, nothing is loaded).
 *    regMrDmaBuf then registers [data, data + size) with
 *    ibv_reg_dmabuf_mr(pd, offset, size, iova = data, fd) and regMr's
 *    access; otherwise it returns collInvalidUsage saying which condition
 *    failed. regMr stays host memory only;
 *  - iput is not supported (collInvalidUsage);
 *  - iflush: a no-op for host memory (visible once the completion arrived).
 *    For GPU memory (a regMrDmaBuf handle) a NIC's PCIe writes may not be
 *    visible to the GPU's kernels when the completion is: iflush calls
 *    cuFlushGPUDirectRDMAWrites (collCudaRdmaFlushRun), skipped for a GPU
 *    that orders such writes itself (the device, its context and whether it
 *    needs the flush are asked of the driver once, at regMrDmaBuf, and kept
 *    in the registration), and a GPU that can do neither gets no
 *    dma-buf path (staged). NCCL does the same, or an RDMA read of one byte
 *    through a loopback QP. Tested on the fake driver and fake HCA only. */
extern const collNet_t collNetIb;

#define COLL_IB_MAX_REQUESTS 64
#define COLL_IB_EAGER_BYTES 16384

#endif
