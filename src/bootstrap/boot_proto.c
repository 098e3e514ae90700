/* boot_proto.c - bootstrap wire messages, MACs, validation (see boot_proto.h). */
#include "bootstrap/boot_proto.h"

#include <arpa/inet.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "coll.h"

void collBootMac(const uint8_t key[COLL_BOOT_KEY_BYTES], const void* msg, size_t len,
                 uint8_t mac[COLL_BOOT_MAC_BYTES]) {
  struct hmac_sha256_ctx ctx;
  hmac_sha256_set_key(&ctx, COLL_BOOT_KEY_BYTES, key);
  hmac_sha256_update(&ctx, len, msg);
  hmac_sha256_digest(&ctx, COLL_BOOT_MAC_BYTES, mac);
}

void collBootDeriveKey(const char* a, const char* b, uint8_t key[COLL_BOOT_KEY_BYTES]) {
  static const char label[] = "coll launcher job key v1";
  struct sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, sizeof label, (const uint8_t*)label);
  sha256_update(&ctx, strlen(a ? a : "") + 1, (const uint8_t*)(a ? a : ""));
  sha256_update(&ctx, strlen(b ? b : "") + 1, (const uint8_t*)(b ? b : ""));
  sha256_digest(&ctx, COLL_BOOT_KEY_BYTES, key);
}

uint64_t collBootConnToken(const uint8_t key[COLL_BOOT_KEY_BYTES], uint64_t jobNonce) {
  uint8_t msg[16] = "conn-token";
  memcpy(msg + 8, &jobNonce, sizeof jobNonce);
  uint8_t mac[COLL_BOOT_MAC_BYTES];
  collBootMac(key, msg, sizeof msg, mac);
  uint64_t t;
  memcpy(&t, mac, sizeof t);
  return t | 1; /* never 0 */
}

void collBootSealHello(collBootHelloMsg* h, const uint8_t key[COLL_BOOT_KEY_BYTES]) {
  h->magic = COLL_BOOT_MAGIC;
  h->version = COLL_VERSION_CODE;
  h->kind = COLL_BOOT_HELLO;
  collBootMac(key, h, offsetof(collBootHelloMsg, mac), h->mac);
}

void collBootSealReply(collBootReplyMsg* m, const uint8_t key[COLL_BOOT_KEY_BYTES]) {
  m->reason[sizeof m->reason - 1] = 0;
  m->magic = COLL_BOOT_MAGIC;
  m->version = COLL_VERSION_CODE;
  if (m->kind == COLL_BOOT_REPLY_UNAUTH) memset(m->mac, 0, sizeof m->mac);
  else collBootMac(key, m, offsetof(collBootReplyMsg, mac), m->mac);
}

void collBootSealRing(collBootRingMsg* m, const uint8_t key[COLL_BOOT_KEY_BYTES]) {
  m->magic = COLL_BOOT_MAGIC;
  m->version = COLL_VERSION_CODE;
  m->kind = COLL_BOOT_RING;
  collBootMac(key, m, offsetof(collBootRingMsg, mac), m->mac);
}

static int collMacOk(const uint8_t key[COLL_BOOT_KEY_BYTES], const void* msg, size_t len, const uint8_t* mac) {
  uint8_t want[COLL_BOOT_MAC_BYTES];
  collBootMac(key, msg, len, want);
  return memeql_sec(want, mac, COLL_BOOT_MAC_BYTES) != 0;
}

int collBootAddrUsable(const collSockAddr* a) {
  if (a->sa.sa_family == AF_INET) return a->sin.sin_port != 0 && a->sin.sin_addr.s_addr != htonl(INADDR_ANY);
  if (a->sa.sa_family == AF_INET6) return a->sin6.sin6_port != 0 && !IN6_IS_ADDR_UNSPECIFIED(&a->sin6.sin6_addr);
  return 0;
}

int collBootUnixNameValid(const char* s, size_t n) {
  size_t i = 0;
  for (; i < n && s[i]; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
      return 0;
  return i < n;
}

static void collNsIdInit(void);
static uint64_t collNsIdValue;
static pthread_once_t collNsIdOnce = PTHREAD_ONCE_INIT;

static void collNsIdInit(void) {
  uint8_t buf[64];
  size_t len = 0;
  memset(buf, 0, sizeof buf);
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    len = fread(buf, 1, 40, f);
    fclose(f);
  }
  struct stat st;
  if (stat("/proc/self/ns/net", &st) != 0 || len == 0) {
    collNsIdValue = 0; /* unknown: never use abstract sockets */
    return;
  }
  memcpy(buf + 40, &st.st_ino, sizeof st.st_ino);
  memcpy(buf + 48, &st.st_dev, sizeof st.st_dev);
  uint8_t d[SHA256_DIGEST_SIZE];
  struct sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, sizeof buf, buf);
  sha256_digest(&ctx, sizeof d, d);
  memcpy(&collNsIdValue, d, sizeof collNsIdValue);
  collNsIdValue |= 1;
}

uint64_t collBootNsId(void) {
  pthread_once(&collNsIdOnce, collNsIdInit);
  return collNsIdValue;
}

collHelloVerdict collBootCheckHello(const void* buf, size_t len, const uint8_t key[COLL_BOOT_KEY_BYTES],
                                    collBootHelloMsg* out, uint32_t* outVersion, char* reason, size_t reasonLen) {
  collBootHelloMsg h;
  if (reasonLen) reason[0] = 0;
  uint32_t hdr[2];
  if (len < sizeof hdr) return COLL_HELLO_GARBAGE;
  memcpy(hdr, buf, sizeof hdr);
  if (hdr[0] != COLL_BOOT_MAGIC) return COLL_HELLO_GARBAGE;
  if (hdr[1] != COLL_VERSION_CODE) {
    *outVersion = hdr[1];
    return COLL_HELLO_VERSION;
  }
  if (len != sizeof h) return COLL_HELLO_GARBAGE;
  memcpy(&h, buf, sizeof h);
  if (h.kind != COLL_BOOT_HELLO) return COLL_HELLO_GARBAGE;
  if (!collMacOk(key, &h, offsetof(collBootHelloMsg, mac), h.mac)) return COLL_HELLO_BADMAC;
  if (h.nranks < 1 || h.nranks > COLL_BOOT_MAX_RANKS) {
    snprintf(reason, reasonLen, "nranks %d is out of range [1, %d]", (int)h.nranks, COLL_BOOT_MAX_RANKS);
    return COLL_HELLO_RANGE;
  }
  if (h.rank < 0 || h.rank >= h.nranks) {
    snprintf(reason, reasonLen, "rank %d is out of range [0, %d)", (int)h.rank, (int)h.nranks);
    return COLL_HELLO_RANGE;
  }
  if (!collBootAddrUsable(&h.ringAddr) || !collBootUnixNameValid(h.unixName, sizeof h.unixName)) {
    snprintf(reason, reasonLen, "rank %d sent an unusable ring address (family %d)", (int)h.rank,
             (int)h.ringAddr.sa.sa_family);
    return COLL_HELLO_RANGE;
  }
  *out = h;
  return COLL_HELLO_OK;
}

/* Copies text from the network, keeping printable ASCII only. */
static void collSanitize(char* dst, size_t dstLen, const char* src, size_t srcLen) {
  if (!dstLen) return;
  size_t j = 0;
  for (size_t i = 0; i < srcLen && src[i] && j + 1 < dstLen; i++)
    dst[j++] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
  dst[j] = 0;
}

collReplyVerdict collBootCheckReply(const void* buf, size_t len, const uint8_t key[COLL_BOOT_KEY_BYTES],
                                    const collBootHelloMsg* h, uint64_t* jobNonce, collBootNext* next, int* status,
                                    char* reason, size_t reasonLen) {
  collBootReplyMsg m;
  if (reasonLen) reason[0] = 0;
  if (len != sizeof m) {
    snprintf(reason, reasonLen, "reply of %zu bytes, expected %zu", len, sizeof m);
    return COLL_REPLY_INVALID;
  }
  memcpy(&m, buf, sizeof m);
  if (m.magic != COLL_BOOT_MAGIC) {
    snprintf(reason, reasonLen, "reply without coll's magic (0x%08x)", m.magic);
    return COLL_REPLY_INVALID;
  }
  if (m.kind == COLL_BOOT_REPLY_UNAUTH) { /* never trusted: only its text is shown */
    collSanitize(reason, reasonLen, m.reason, sizeof m.reason);
    return COLL_REPLY_UNAUTH;
  }
  if (m.version != COLL_VERSION_CODE) {
    snprintf(reason, reasonLen, "reply from coll version %u, this library is %d", m.version, COLL_VERSION_CODE);
    return COLL_REPLY_INVALID;
  }
  if (!collMacOk(key, &m, offsetof(collBootReplyMsg, mac), m.mac)) {
    snprintf(reason, reasonLen, "reply with a wrong MAC (not from this job's root)");
    return COLL_REPLY_INVALID;
  }
  if (m.rankNonce != h->rankNonce || m.rank != h->rank || m.nranks != h->nranks) {
    snprintf(reason, reasonLen, "authentic reply to another hello (rank %d of %d; a replay?)", (int)m.rank,
             (int)m.nranks);
    return COLL_REPLY_INVALID;
  }
  switch (m.kind) {
    case COLL_BOOT_REPLY_OK:
      if (m.jobNonce == 0 || (h->nranks > 1 && !collBootAddrUsable(&m.next)) ||
          !collBootUnixNameValid(m.nextUnix, sizeof m.nextUnix)) {
        snprintf(reason, reasonLen, "reply with an unusable next address (family %d) or nonce",
                 (int)m.next.sa.sa_family);
        return COLL_REPLY_INVALID;
      }
      *jobNonce = m.jobNonce;
      next->addr = m.next;
      next->nsId = m.nextNsId;
      memcpy(next->unixName, m.nextUnix, sizeof next->unixName);
      return COLL_REPLY_OK;
    case COLL_BOOT_REPLY_ERR:
      *status = m.status > collSuccess && m.status < collNumResults && m.status != collInProgress ? m.status
                                                                                                 : collRemoteError;
      collSanitize(reason, reasonLen, m.reason, sizeof m.reason);
      return COLL_REPLY_ERR;
    case COLL_BOOT_REPLY_BUSY:
      collSanitize(reason, reasonLen, m.reason, sizeof m.reason);
      return COLL_REPLY_BUSY;
    default:
      snprintf(reason, reasonLen, "reply of unknown kind %u", m.kind);
      return COLL_REPLY_INVALID;
  }
}

int collBootCheckRing(const void* buf, size_t len, const uint8_t key[COLL_BOOT_KEY_BYTES], int want,
                      uint64_t jobNonce) {
  collBootRingMsg m;
  if (len != sizeof m) return 0;
  memcpy(&m, buf, sizeof m);
  return m.magic == COLL_BOOT_MAGIC && m.version == COLL_VERSION_CODE && m.kind == COLL_BOOT_RING &&
         m.rank == want && m.jobNonce == jobNonce && collMacOk(key, &m, offsetof(collBootRingMsg, mac), m.mac);
}
