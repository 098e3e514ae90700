/*
 * tuner_example.c - an example tuner plugin (include/coll_tuner.h), used by
 * test_tuner: for all-reduce it picks the candidate named by the environment
 * variable COLL_EXAMPLE_TUNER_ALGO (when it is a candidate) with chunk size
 * 65536 and 1 channel; for every other collective it keeps coll's choice.
 * It counts its queries so the test can see that answers are cached.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_tuner.h"

static int exampleQueries; /* read by the test through dlsym */
int collExampleTunerQueries(void) { return exampleQueries; }

static collResult_t exampleInit(int nranks, int nnodes, void** context) {
  (void)nranks;
  (void)nnodes;
  *context = getenv("COLL_EXAMPLE_TUNER_ALGO");
  return collSuccess;
}

static collResult_t exampleGetChoice(void* context, const collTunerQuery_t* q, collTunerAnswer_t* answer) {
  const char* want = context;
  __atomic_add_fetch(&exampleQueries, 1, __ATOMIC_RELAXED);
  if (q->coll != collTunerAllReduce || !want) return collSuccess;
  for (int i = 0; i < q->ncandidates; i++)
    if (strcmp(q->candidates[i], want) == 0) {
      answer->algorithm = i;
      answer->chunkBytes = 65536;
      answer->nchannels = 1;
    }
  return collSuccess;
}

static collResult_t exampleDestroy(void* context) {
  (void)context;
  return collSuccess;
}

__attribute__((visibility("default"))) const collTuner_v1_t collTunerPlugin_v1 = {
    "example", exampleInit, exampleGetChoice, exampleDestroy};
