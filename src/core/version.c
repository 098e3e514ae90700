/* version.c - collGetVersion, collGetErrorString, collGetLastError. */
#include "coll.h"
#include "core/core.h"
#include "misc/log.h"

collResult_t collGetVersionImpl(int* version) {
  if (!version) return collSetError(collInvalidArgument, "collGetVersion: version is NULL");
  *version = COLL_VERSION_CODE;
  return collSuccess;
}

const char* collGetErrorString(collResult_t r) {
  switch (r) {
    case collSuccess: return "no error";
    case collSystemError: return "system error (an OS call failed; see collGetLastError)";
    case collInternalError: return "internal error (a bug in coll)";
    case collInvalidArgument: return "invalid argument";
    case collInvalidUsage: return "invalid usage";
    case collRemoteError: return "remote error (a peer failed or disconnected)";
    case collInProgress: return "operation in progress";
    case collTimeout: return "timeout (a deadline expired; collGetLastError names which)";
    default: return "unknown result code";
  }
}

/* Unlike ncclGetLastError (a thread-local buffer written by every WARN and
 * never cleared), the message describes the last coll call of this thread
 * only: api.c clears it when a call starts and when it succeeds. */
const char* collGetLastError(collComm_t comm) {
  (void)comm;
  return collLastErrorMessage();
}
