/* nodes.c - node layout of a communicator, see nodes.h. */
#include "nodes.h"

#include <stdlib.h>

int collNodeLayoutInit(collNodeLayout* L, const int* rankNode, int nnodes,
                       int nranks) {
  if (nranks < 1) return -1;
  if (rankNode == NULL || nnodes < 1) nnodes = 1;
  const int single = nnodes == 1;
  int* mem = malloc(sizeof(int) * ((size_t)nranks * 3 + (size_t)nnodes + 1));
  if (!mem) return -2;
  L->nranks = nranks;
  L->nnodes = nnodes;
  L->node = mem;
  L->local = mem + nranks;
  L->ranks = mem + 2 * (size_t)nranks;
  L->start = mem + 3 * (size_t)nranks;
  for (int i = 0; i <= nnodes; i++) L->start[i] = 0;
  for (int r = 0; r < nranks; r++) {
    int nd = single ? 0 : rankNode[r];
    if (nd < 0 || nd >= nnodes) {
      free(mem);
      return -1;
    }
    L->node[r] = nd;
    L->local[r] = L->start[nd + 1]++; /* count per node, shifted by one */
  }
  for (int i = 0; i < nnodes; i++) {
    if (L->start[i + 1] == 0) { /* a node without ranks */
      free(mem);
      return -1;
    }
    L->start[i + 1] += L->start[i];
  }
  for (int r = 0; r < nranks; r++) L->ranks[L->start[L->node[r]] + L->local[r]] = r;
  return 0;
}

void collNodeLayoutFree(collNodeLayout* L) {
  free(L->node);
  L->node = L->local = L->start = L->ranks = NULL;
}
