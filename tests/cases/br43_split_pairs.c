/*
 * BR-43: disjoint sub-communicators from collCommSplit with a per-rank
 * colour (pytorch/pytorch#130102: a barrier on one of two subgroups let the
 * first two processes to arrive pass together; pytorch/pytorch#25390:
 * pairing ranks anew every iteration ended in "connection refused" or a
 * hang). The reports built the groups inconsistently, which torch forbids;
 * a split with a per-rank colour is the correct form of the same intent.
 *
 * 4 ranks:
 *  1. colour 0 for ranks 0 and 3, 1 for ranks 1 and 2, key = rank. Rank 0
 *     sleeps 3 s before the barrier on its sub-communicator, the others call
 *     it at once: rank 3's barrier ends after rank 0 woke, ranks 1 and 2 pass at once
 *     (< 2 s). (A first barrier lines each pair up before the sleep.) All-reduce of 10^rank: 1001 on ranks 0 and 3, 110 on 1 and 2.
 *     Rank 0 is sub-rank 0 and rank 3 sub-rank 1, size 2.
 *  2. same colours, key = -rank; all-gather of the world rank: [3, 0] on
 *     ranks 0 and 3, [2, 1] on ranks 1 and 2.
 *  3. 20 iterations: rank 0 draws a permutation of 0..3 (seeded with the
 *     iteration) and broadcasts it on the world; (perm[0], perm[1]) get
 *     colour 0, (perm[2], perm[3]) colour 1; split; all-reduce of 10^rank
 *     gives 10^a + 10^b for the pair; destroy. 20 iterations under 30 s;
 *     open fds and threads afterwards as before.
 *  4. rank 2 passes COLL_SPLIT_NOCOLOR, the others colour 0: rank 2 gets a
 *     NULL communicator and collSuccess, the others an all-reduce of 1011.
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../integration/mp_harness.h"
#include "helper_sem.h"

static const int32_t kPow10[4] = {1, 10, 100, 1000};

/* rank 0's clock (CLOCK_MONOTONIC, shared by the processes) when its sleep
 * ended, in a mapping shared with the forked ranks */
static volatile double* gWoke;

static int part1(collComm_t world, int rank) {
  int fails = 0;
  collComm_t sub = NULL;
  int color = rank == 0 || rank == 3 ? 0 : 1;
  if (!SEM_OK(collCommSplit(world, color, rank, &sub, NULL))) return fails;
  SEM_CHECK(sub != NULL, "part 1: no sub-communicator");
  if (!sub) return fails;
  /* line the pair up first, so that rank 3's wait below measures rank 0's
   * sleep and not how far apart the two left the split under load */
  SEM_OK(collBarrier(sub, NULL));
  if (rank == 0) {
    sleep(3);
    *gWoke = semNow();
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
  }
  double t0 = semNow();
  SEM_OK(collBarrier(sub, NULL));
  double t1 = semNow(), dt = t1 - t0;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  /* rank 3 may leave the first barrier later than rank 0 on a loaded
   * machine: its wait is then shorter than 3 s, but it must not end before
   * rank 0 woke */
  if (rank == 3)
    SEM_CHECK(*gWoke > 0 && t1 >= *gWoke,
              "part 1: rank 3 left the barrier after %.3f s, %.3f s before its partner arrived", dt,
              *gWoke > 0 ? *gWoke - t1 : -1.0);
  if (rank == 1 || rank == 2) SEM_CHECK(dt < 2.0, "part 1: rank %d's barrier took %.3f s (its pair has no sleeper)", rank, dt);
  printf("part 1: rank %d barrier %.3f s\n", rank, dt);
  int32_t v = kPow10[rank], sum = -1;
  SEM_OK(collAllReduce(&v, &sum, 1, collInt32, collSum, sub, NULL));
  int32_t exp = color == 0 ? 1001 : 110;
  SEM_CHECK(sum == exp, "part 1: all-reduce gave %d, expected %d", sum, exp);
  int subRank = -1, size = -1;
  SEM_OK(collCommUserRank(sub, &subRank));
  SEM_OK(collCommCount(sub, &size));
  int expRank = rank == 0 || rank == 1 ? 0 : 1;
  SEM_CHECK(subRank == expRank && size == 2, "part 1: sub-rank %d of %d, expected %d of 2", subRank, size, expRank);
  SEM_OK(collCommDestroy(sub));
  return fails;
}

static int part2(collComm_t world, int rank) {
  int fails = 0;
  collComm_t sub = NULL;
  int color = rank == 0 || rank == 3 ? 0 : 1;
  if (!SEM_OK(collCommSplit(world, color, -rank, &sub, NULL)) || !sub) return fails + !sub;
  int32_t mine = rank, got[3] = {-1, -1, -1};
  SEM_OK(collAllGather(&mine, got, 1, collInt32, sub, NULL));
  int32_t e0 = color == 0 ? 3 : 2, e1 = color == 0 ? 0 : 1;
  SEM_CHECK(got[0] == e0 && got[1] == e1 && got[2] == -1, "part 2: all-gather gave [%d, %d] (then %d), expected [%d, %d]",
            got[0], got[1], got[2], e0, e1);
  SEM_OK(collCommDestroy(sub));
  return fails;
}

static uint64_t xorshift(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static int part3(collComm_t world, int rank) {
  int fails = 0;
  /* the world's broadcast connections are made on first use: make them
   * before counting, so that only what the pairs leave behind counts */
  int32_t warm[4] = {0, 1, 2, 3};
  SEM_OK(collBroadcast(warm, warm, 4, collInt32, 0, world, NULL));
  int fd0 = semCountDir("/proc/self/fd"), th0 = semCountDir("/proc/self/task");
  double t0 = semNow();
  for (int it = 0; it < 20 && !fails; it++) {
    int32_t perm[4] = {0, 1, 2, 3};
    if (rank == 0) {
      uint64_t s = 0x9e3779b97f4a7c15ull ^ (uint64_t)(it + 1);
      for (int i = 3; i > 0; i--) {
        int j = (int)(xorshift(&s) % (uint64_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
      }
    } else {
      perm[0] = perm[1] = perm[2] = perm[3] = -1;
    }
    SEM_OK(collBroadcast(perm, perm, 4, collInt32, 0, world, NULL));
    int pos = 0;
    while (pos < 4 && perm[pos] != rank) pos++;
    SEM_CHECK(pos < 4, "part 3 iteration %d: rank missing from the permutation [%d %d %d %d]", it, perm[0], perm[1],
              perm[2], perm[3]);
    if (pos == 4) break;
    int color = pos / 2, partner = perm[pos ^ 1];
    collComm_t pair = NULL;
    if (!SEM_OK(collCommSplit(world, color, rank, &pair, NULL)) || !pair) {
      fails += !pair;
      break;
    }
    int32_t v = kPow10[rank], sum = -1;
    SEM_OK(collAllReduce(&v, &sum, 1, collInt32, collSum, pair, NULL));
    SEM_CHECK(sum == kPow10[rank] + kPow10[partner], "part 3 iteration %d: pair (%d, %d) gave %d, expected %d", it, rank,
              partner, sum, kPow10[rank] + kPow10[partner]);
    SEM_OK(collCommDestroy(pair));
  }
  double dt = semNow() - t0;
  int fd1 = semCountDir("/proc/self/fd"), th1 = semCountDir("/proc/self/task");
  SEM_CHECK(dt < 30.0, "part 3: 20 iterations took %.2f s", dt);
  SEM_CHECK(fd1 == fd0 && th1 == th0, "part 3: fds %d -> %d, threads %d -> %d after 20 split/destroy cycles", fd0, fd1,
            th0, th1);
  if (rank == 0) printf("part 3: 20 iterations in %.2f s, fds %d -> %d, threads %d -> %d\n", dt, fd0, fd1, th0, th1);
  return fails;
}

static int part4(collComm_t world, int rank) {
  int fails = 0;
  collComm_t sub = (collComm_t)&fails; /* must be overwritten */
  SEM_OK(collCommSplit(world, rank == 2 ? COLL_SPLIT_NOCOLOR : 0, rank, &sub, NULL));
  if (rank == 2) {
    SEM_CHECK(sub == NULL, "part 4: COLL_SPLIT_NOCOLOR gave a communicator");
    return fails;
  }
  SEM_CHECK(sub != NULL && sub != (collComm_t)&fails, "part 4: no communicator for colour 0");
  if (!sub || sub == (collComm_t)&fails) return fails;
  int32_t v = kPow10[rank], sum = -1;
  SEM_OK(collAllReduce(&v, &sum, 1, collInt32, collSum, sub, NULL));
  SEM_CHECK(sum == 1011, "part 4: all-reduce gave %d, expected 1011", sum);
  int size = -1;
  SEM_OK(collCommCount(sub, &size));
  SEM_CHECK(size == 3, "part 4: size %d, expected 3", size);
  SEM_OK(collCommDestroy(sub));
  return fails;
}

static int body(collComm_t world, int rank, int nranks, void* arg) {
  (void)arg;
  if (nranks != 4) return 1;
  int fails = part1(world, rank);
  if (!fails) fails += part2(world, rank);
  if (!fails) fails += part3(world, rank);
  if (!fails) fails += part4(world, rank);
  return fails;
}

int main(void) {
  gWoke = mmap(NULL, sizeof *gWoke, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (gWoke == MAP_FAILED) return 1;
  *gWoke = 0;
  int rc = collMpRun(4, 120, body, NULL);
  printf("BR-43 split into disjoint pairs on 4 ranks: %s\n", rc ? "FAILED" : "passed");
  return rc;
}
