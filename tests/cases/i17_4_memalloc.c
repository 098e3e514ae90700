/*
 * i17_4_memalloc.c - issue 17 point 4: collMemAlloc / collMemFree and
 * collCommRegister / collCommDeregister, and every error they document.
 *
 * Expected: an allocation is zero-filled, writable, page-aligned and costs
 * one descriptor until freed; collMemFree(NULL) succeeds; freeing an address
 * inside an allocation, memory of malloc, or an allocation twice is
 * collInvalidArgument; registering malloc'd memory, a range past the
 * allocation's size, or an address of another process (a child's
 * collMemAlloc pointer, not mapped here) is collInvalidArgument; the same
 * range twice is collInvalidUsage; freeing registered memory is
 * collInvalidUsage and frees nothing; deregistering an unknown or a
 * released handle is collInvalidArgument; destroying the communicator
 * releases its registrations (then collMemFree works). Each error's message
 * (collGetLastError) must say what was wrong. Descriptors and coll-mem
 * mappings are back to where they were at the end.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll.h"
#include "helper_fail.h"
#include "helper_zc.h"

static int fails;

#define EXPECT(cond, ...)                 \
  do {                                    \
    if (!(cond)) {                        \
      fails++;                            \
      printf("FAIL line %d: ", __LINE__); \
      printf(__VA_ARGS__);                \
      printf("\n");                       \
    }                                     \
  } while (0)

/* r must be want, and the message must contain needle. */
static void expectErr(collResult_t r, collResult_t want, const char* needle, const char* what) {
  const char* msg = collGetLastError(NULL);
  EXPECT(r == want, "%s: got %s, want %s (%s)", what, collGetErrorString(r), collGetErrorString(want), msg);
  EXPECT(strstr(msg, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what, msg, needle);
}

/* A child's collMemAlloc address, through a pipe (it exits after). */
static uintptr_t childPointer(void) {
  int p[2];
  if (pipe(p) != 0) return 0;
  pid_t pid = fork();
  if (pid == 0) {
    void* q = NULL;
    /* 64 MiB: not an address this process has mapped at the same place */
    uintptr_t v = collMemAlloc(&q, (size_t)64 << 20) == collSuccess ? (uintptr_t)q + 4096 : 0;
    if (write(p[1], &v, sizeof v) != (ssize_t)sizeof v) _exit(1);
    _exit(0);
  }
  close(p[1]);
  uintptr_t v = 0;
  if (read(p[0], &v, sizeof v) != (ssize_t)sizeof v) v = 0;
  close(p[0]);
  int st;
  waitpid(pid, &st, 0);
  return v;
}

int main(void) {
  int fds0 = failCountFds(), maps0 = zcCountMemMaps();
  void* p = NULL;
  expectErr(collMemAlloc(NULL, 4096), collInvalidArgument, "ptr is NULL", "collMemAlloc(NULL)");
  expectErr(collMemAlloc(&p, 0), collInvalidArgument, "size is 0", "collMemAlloc(size 0)");
  EXPECT(p == NULL, "collMemAlloc(size 0) left *ptr %p", p);
  EXPECT(collMemFree(NULL) == collSuccess, "collMemFree(NULL): %s", collGetLastError(NULL));

  size_t size = 100000; /* not a page multiple */
  EXPECT(collMemAlloc(&p, size) == collSuccess, "collMemAlloc: %s", collGetLastError(NULL));
  if (!p) return 1;
  EXPECT(((uintptr_t)p & 4095) == 0, "not page-aligned: %p", p);
  size_t nonzero = 0;
  for (size_t i = 0; i < size; i++) nonzero += ((unsigned char*)p)[i] != 0;
  EXPECT(nonzero == 0, "%zu bytes not zero", nonzero);
  memset(p, 0x5a, size);
  EXPECT(failCountFds() == fds0 + 1, "an allocation holds %d descriptors, want 1", failCountFds() - fds0);
  EXPECT(zcCountMemMaps() == maps0 + 1, "coll-mem mappings %d, want %d", zcCountMemMaps(), maps0 + 1);

  expectErr(collMemFree((char*)p + 4096), collInvalidArgument, "not its start", "collMemFree(inside)");
  char* m = malloc(4096);
  expectErr(collMemFree(m), collInvalidArgument, "not returned by collMemAlloc", "collMemFree(malloc)");

  collComm_t comm = NULL;
  EXPECT(collCommInitAll(&comm, 1, NULL) == collSuccess, "collCommInitAll: %s", collGetLastError(NULL));
  if (!comm) return 1;
  void* h = NULL;
  void* h2 = NULL;
  expectErr(collCommRegister(comm, p, size, NULL), collInvalidArgument, "handle is NULL", "register(handle NULL)");
  expectErr(collCommRegister(comm, NULL, size, &h), collInvalidArgument, "buff is NULL", "register(buff NULL)");
  expectErr(collCommRegister(comm, p, 0, &h), collInvalidArgument, "size is 0", "register(size 0)");
  expectErr(collCommRegister(NULL, p, size, &h), collInvalidArgument, "comm is NULL", "register(comm NULL)");
  expectErr(collCommRegister(comm, m, 4096, &h), collInvalidArgument, "not memory of collMemAlloc",
            "register(malloc)");
  EXPECT(h == NULL, "a failed registration returned handle %p", h);
  /* past the size asked for (inside the last page) and past the mapping */
  expectErr(collCommRegister(comm, p, size + 1, &h), collInvalidArgument, "1 bytes beyond", "register(size + 1)");
  expectErr(collCommRegister(comm, (char*)p + 8192, size, &h), collInvalidArgument, "8192 bytes beyond",
            "register(offset 8192, size)");
  uintptr_t foreign = childPointer();
  EXPECT(foreign != 0, "the child did not allocate");
  expectErr(collCommRegister(comm, (void*)foreign, 4096, &h), collInvalidArgument, "not memory of collMemAlloc",
            "register(another process's address)");

  EXPECT(collCommRegister(comm, p, size, &h) == collSuccess && h, "register: %s", collGetLastError(NULL));
  expectErr(collCommRegister(comm, p, size, &h2), collInvalidUsage, "already registered", "register twice");
  EXPECT(collCommRegister(comm, (char*)p + 4096, 4096, &h2) == collSuccess && h2 && h2 != h,
         "register a part: %s", collGetLastError(NULL));
  expectErr(collMemFree(p), collInvalidUsage, "still registered 2 times", "free registered");
  EXPECT(((unsigned char*)p)[size - 1] == 0x5a, "free of registered memory unmapped it");
  expectErr(collCommDeregister(comm, m), collInvalidArgument, "not a live registration", "deregister(unknown)");
  expectErr(collCommDeregister(comm, NULL), collInvalidArgument, "handle is NULL", "deregister(NULL)");
  EXPECT(collCommDeregister(comm, h) == collSuccess, "deregister: %s", collGetLastError(NULL));
  expectErr(collCommDeregister(comm, h), collInvalidArgument, "not a live registration", "deregister twice");
  expectErr(collMemFree(p), collInvalidUsage, "still registered 1 time", "free still registered once");
  /* destroying the communicator releases h2 */
  EXPECT(collCommDestroy(comm) == collSuccess, "collCommDestroy: %s", collGetLastError(NULL));
  EXPECT(collMemFree(p) == collSuccess, "free after destroy: %s", collGetLastError(NULL));
  expectErr(collMemFree(p), collInvalidArgument, "freed already", "free twice");
  free(m);
  EXPECT(failCountFds() == fds0, "descriptors %d, before %d", failCountFds(), fds0);
  EXPECT(zcCountMemMaps() == maps0, "coll-mem mappings %d, before %d", zcCountMemMaps(), maps0);
  printf("i17_4_memalloc: %s\n", fails ? "FAILED" : "passed");
  return fails ? 1 : 0;
}
