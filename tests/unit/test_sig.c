/*
 * test_sig.c - call signatures in message tags (src/engine/sig.h): packing
 * and unpacking every field, tags that differ for every difference the
 * receiver must see, and the words of the mismatch messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "engine/sig.h"
#include "misc/log.h"

static collSig sigOf(collFunc fn, collDataType_t t, collRedOp_t op, int root, size_t count, uint32_t seq, int wide) {
  collOp o = {.fn = fn, .count = count, .dtype = t, .op = op, .root = root};
  collSig s;
  collSigOf(&o, seq, wide, &s);
  return s;
}

/* Every field survives the round trip (seq modulo 64; a count modulo its
 * field, which broadcast and reduce on 70000 ranks cut to 30 bits); a tag is
 * never 0. */
static void test_round_trip(void** st) {
  (void)st;
  static const int nranks[] = {1, 2, 3, 4, 1000, 70000};
  static const uint64_t counts[] = {0, 1, 7, 1u << 20, (1ull << 36) - 1};
  for (size_t ni = 0; ni < sizeof nranks / sizeof nranks[0]; ni++)
    for (int fn = 0; fn < COLL_FN_COUNT; fn++)
      for (int t = 0; t < collNumTypes; t++)
        for (int op = 0; op < collNumOps; op++)
          for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            int n = nranks[ni], root = n - 1;
            collSig s = sigOf((collFunc)fn, (collDataType_t)t, (collRedOp_t)op, root, counts[ci], 67, 1), u;
            uint64_t tag = collSigTag(&s, n);
            assert_true(tag != 0);
            assert_true(collSigFromTag(tag, n, &u));
            assert_int_equal(u.fn, s.fn);
            assert_int_equal(u.dtype, s.dtype);
            assert_int_equal(u.op, s.op);
            assert_int_equal(u.wide, s.wide);
            assert_int_equal(u.root, s.root);
            assert_int_equal(u.seq, s.seq & 63);
            /* rooted: the root takes ceil(log2(n)) of the 47 count bits */
            int rooted = s.fn == COLL_FN_BROADCAST || s.fn == COLL_FN_REDUCE, rb = 0;
            while (rooted && (1 << rb) < n) rb++;
            assert_true(u.count == (s.count & ((UINT64_C(1) << (47 - rb)) - 1)));
            assert_true(collSigTag(&u, n) == tag);
          }
}

/* A receive and its send have the same tag; what the ranks may differ in
 * (op of a non-reducing call, root of a non-rooted one, call number of a
 * send) does not change it; everything else does. */
static void test_what_differs(void** st) {
  (void)st;
  int n = 4;
  collSig send = sigOf(COLL_FN_SEND, collFloat32, collMax, 2, 3, 9, 1);
  collSig recv = sigOf(COLL_FN_RECV, collFloat32, collSum, 1, 3, 5, 0);
  assert_true(collSigTag(&send, n) == collSigTag(&recv, n));
  collSig ag = sigOf(COLL_FN_ALLGATHER, collInt8, collSum, 0, 10, 3, 1);
  collSig ag2 = sigOf(COLL_FN_ALLGATHER, collInt8, collMax, 3, 10, 3, 0);
  assert_true(collSigTag(&ag, n) == collSigTag(&ag2, n));
  collSig base = sigOf(COLL_FN_REDUCE, collFloat16, collSum, 1, 1000, 3, 1);
  uint64_t t0 = collSigTag(&base, n);
  collSig v[] = {sigOf(COLL_FN_ALLREDUCE, collFloat16, collSum, 1, 1000, 3, 1),
                 sigOf(COLL_FN_REDUCE, collBfloat16, collSum, 1, 1000, 3, 1),
                 sigOf(COLL_FN_REDUCE, collFloat16, collAvg, 1, 1000, 3, 1),
                 sigOf(COLL_FN_REDUCE, collFloat16, collSum, 2, 1000, 3, 1),
                 sigOf(COLL_FN_REDUCE, collFloat16, collSum, 1, 1001, 3, 1),
                 sigOf(COLL_FN_REDUCE, collFloat16, collSum, 1, 1000, 4, 1),
                 sigOf(COLL_FN_REDUCE, collFloat16, collSum, 1, 1000, 3, 0)};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) assert_true(collSigTag(&v[i], n) != t0);
  /* 64 calls apart is the same call number (modulo 64) */
  collSig far = sigOf(COLL_FN_REDUCE, collFloat16, collSum, 1, 1000, 3 + 64, 1);
  assert_true(collSigTag(&far, n) == t0);
  /* a connection hello (tag 0) is no signature */
  collSig u;
  assert_false(collSigFromTag(0, n, &u));
  assert_false(collSigFromTag(UINT64_C(7) << 61, n, &u));
}

static void test_describe(void** st) {
  (void)st;
  char b[160];
  collSig s = sigOf(COLL_FN_ALLREDUCE, collFloat32, collSum, 0, 2048, 0, 0);
  collSigDescribe(&s, b, sizeof b);
  assert_string_equal(b, "all-reduce sum of 2048 x float32");
  s = sigOf(COLL_FN_ALLGATHER, collFloat32, collSum, 0, 1024, 0, 0);
  collSigDescribe(&s, b, sizeof b);
  assert_string_equal(b, "all-gather of 1024 x float32");
  s = sigOf(COLL_FN_REDUCESCATTER, collBfloat16, collAvg, 0, 5, 0, 1);
  collSigDescribe(&s, b, sizeof b);
  assert_string_equal(b, "reduce-scatter avg of 5 x bfloat16 per rank");
  s = sigOf(COLL_FN_BROADCAST, collInt8, collSum, 3, 16, 0, 0);
  collSigDescribe(&s, b, sizeof b);
  assert_string_equal(b, "broadcast of 16 x int8 from root 3");
  s = sigOf(COLL_FN_REDUCE, collFloat16, collMax, 1, 7, 0, 0);
  collSigDescribe(&s, b, sizeof b);
  assert_string_equal(b, "reduce max of 7 x float16 to root 1");
  s = sigOf(COLL_FN_RECV, collUint64, collSum, 0, 9, 0, 0);
  collSigDescribe(&s, b, sizeof b);
  assert_string_equal(b, "send/recv of 9 x uint64");
  collSigDescribe(&s, b, 8);
  assert_string_equal(b, "send/re");
}

/* A fake two-rank communicator for the messages (host names only). */
static struct collComm fake;
static collPeerInfo fakePeers[2];

static const char* mismatch(const collSig* me, const collSig* them) {
  fake.rank = 0;
  fake.nranks = 2;
  fake.peers = fakePeers;
  strcpy(fakePeers[0].host, "hostA");
  strcpy(fakePeers[1].host, "hostB");
  assert_int_equal(collSigMismatch(&fake, 1, collSigTag(them, 2), collSigTag(me, 2), me), collInvalidUsage);
  return collLastErrorMessage();
}

static void test_messages(void** st) {
  (void)st;
  collSig ar = sigOf(COLL_FN_ALLREDUCE, collFloat32, collSum, 0, 2048, 5, 0);
  collSig ag = sigOf(COLL_FN_ALLGATHER, collFloat32, collSum, 0, 1024, 5, 0);
  assert_string_equal(mismatch(&ar, &ag), "rank 0: mismatched calls: rank 1 (hostB) called all-gather of 1024 x "
                                          "float32, this rank all-reduce sum of 2048 x float32");
  collSig later = sigOf(COLL_FN_ALLREDUCE, collFloat32, collSum, 0, 2048, 7, 0);
  assert_string_equal(mismatch(&ar, &later), "rank 0: mismatched calls: rank 1 (hostB) is 2 collective call(s) ahead "
                                             "of this rank (both calls all-reduce sum of 2048 x float32): a rank "
                                             "skipped a collective or made an extra one (calls counted modulo 64)");
  collSig wide = sigOf(COLL_FN_ALLREDUCE, collFloat16, collSum, 0, 8, 5, 1);
  collSig native = sigOf(COLL_FN_ALLREDUCE, collFloat16, collSum, 0, 8, 5, 0);
  assert_string_equal(mismatch(&native, &wide),
                      "rank 0: mismatched calls: all-reduce sum of 8 x float16: rank 1 (hostB) carries float16 "
                      "partial results in float32 (COLL_HALF_ACCUM=float), this rank in their type "
                      "(COLL_HALF_ACCUM=native); set it alike on every rank");
  collSig s3 = sigOf(COLL_FN_SEND, collFloat32, collSum, 0, 3, 0, 0), r4 = sigOf(COLL_FN_RECV, collFloat32, collSum, 0, 4, 0, 0);
  assert_string_equal(mismatch(&r4, &s3), "rank 0: mismatched calls: rank 1 (hostB) sent 3 x float32, this rank's "
                                          "receive from rank 1 expects 4 x float32");
  assert_string_equal(mismatch(&r4, &ar), "rank 0: mismatched calls: rank 1 (hostB) called all-reduce sum of 2048 x "
                                          "float32, this rank receives 4 x float32 from rank 1 (send/recv)");
  assert_string_equal(mismatch(&ar, &s3), "rank 0: mismatched calls: rank 1 (hostB) sent 3 x float32 (send/recv), "
                                          "this rank called all-reduce sum of 2048 x float32");
  /* no signature at all (a transport that drops tags) */
  assert_int_equal(collSigMismatch(&fake, 1, 0, collSigTag(&ar, 2), &ar), collInvalidUsage);
  assert_non_null(strstr(collLastErrorMessage(), "whose tag 0x0000000000000000 is no coll call signature"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_what_differs),
      cmocka_unit_test(test_describe),
      cmocka_unit_test(test_messages),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
