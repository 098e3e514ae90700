/* version.c - collGetVersion, collGetErrorString, collGetLastError. */
#include "coll.h"
#include "misc/log.h"

collResult_t collGetVersion(int* version) {
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
    case collTimeout: return "timeout (a deadline expired: COLL_TIMEOUT, collCommSetTimeout or a per-call timeout)";
    default: return "unknown result code";
  }
}

const char* collGetLastError(collComm_t comm) {
  (void)comm;
  return collLastErrorMessage();
}
