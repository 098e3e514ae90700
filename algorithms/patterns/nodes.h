/*
 * nodes.h - node layout arithmetic shared by builders (pure functions).
 *
 * A layout groups the ranks of a communicator by node: node i holds
 * size(i) ranks, listed in increasing rank order; a rank's local index is
 * its position in its node's list. Hierarchical builders walk rings over a
 * node's local ranks and over "the k-th rank of every node".
 *
 *   rankNode = {0, 1, 0, 1, 2}      node 0: ranks 0 2   (local 0, 1)
 *                                   node 1: ranks 1 3   (local 0, 1)
 *                                   node 2: rank  4     (local 0)
 */
#ifndef COLL_PATTERNS_NODES_H_
#define COLL_PATTERNS_NODES_H_

#include <stddef.h>

typedef struct {
  int nranks, nnodes;
  int* node;  /* [nranks] node of each rank */
  int* local; /* [nranks] index of each rank within its node */
  int* start; /* [nnodes + 1] offset of each node's list in `ranks` */
  int* ranks; /* [nranks] ranks grouped by node, increasing within a node */
} collNodeLayout;

/* Builds the layout of nranks ranks from rankNode (node of each rank, values
 * in [0, nnodes), every node non-empty). rankNode == NULL or nnodes <= 1:
 * one node holding every rank. Returns 0, -1 for an invalid layout, -2 when
 * out of memory. On failure nothing needs freeing. */
int collNodeLayoutInit(collNodeLayout* L, const int* rankNode, int nnodes,
                       int nranks);
void collNodeLayoutFree(collNodeLayout* L);

static inline int collNodeSize(const collNodeLayout* L, int node) {
  return L->start[node + 1] - L->start[node];
}
/* The i-th rank (local index i) of node. */
static inline int collNodeRank(const collNodeLayout* L, int node, int i) {
  return L->ranks[L->start[node] + i];
}

/* x mod n in [0, n) for any sign of x (n > 0). */
static inline int collMod(int x, int n) { return ((x % n) + n) % n; }

/* Index of the piece of collSplitEven(count, parts, .) that holds element
 * pos (pos < count). */
static inline int collSplitEvenFind(size_t count, int parts, size_t pos) {
  const size_t q = count / (size_t)parts, r = count % (size_t)parts;
  if (pos < r * (q + 1)) return (int)(pos / (q + 1));
  return (int)(r + (pos - r * (q + 1)) / q); /* here q > 0 */
}

#endif
