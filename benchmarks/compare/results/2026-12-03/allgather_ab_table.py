import sys, statistics, collections
d = collections.defaultdict(list)  # (np, lib, size, place) -> [us]
loads = []
cur = None
for line in open(sys.argv[1]):
    if line.startswith('##'):
        w = line.split()
        if w[1] == 'end': loads.append(' '.join(w[3:])); continue
        cur = (int(w[4]), w[6]); loads.append(' '.join(w[8:])); continue
    f = line.split()
    size = int(f[0])
    d[(cur[0], cur[1], size, 'oop')].append(float(f[5]))
    d[(cur[0], cur[1], size, 'ip')].append(float(f[9]))
def fmt(b):
    if b >= 1 << 20: return '%d MiB' % (b >> 20)
    return '%d KiB' % (b >> 10)
rounds = len(d[next(iter(d))])
print('load average (1/5/15 min) at the start of each run: first %s, last %s, 1-min range %s .. %s' % (
    loads[0], loads[-1], min(float(l.split()[0]) for l in loads), max(float(l.split()[0]) for l in loads)))
print()
for np_ in (2, 4):
    print('### %d ranks (allgather_perf -np %d -b 256K -e 64M -f 4 -w 3 -n 10), %d interleaved rounds, median time us' % (np_, np_, rounds))
    print()
    print('| size | main oop | branch oop | main/branch oop | main in place | branch in place | main/branch in place |')
    print('|---:|---:|---:|---:|---:|---:|---:|')
    for size in sorted({k[2] for k in d if k[0] == np_}):
        row = [fmt(size)]
        for pl in ('oop', 'ip'):
            m = statistics.median(d[(np_, 'main', size, pl)]); n = statistics.median(d[(np_, 'new', size, pl)])
            row += ['%.0f' % m, '%.0f' % n, '**%.2f**' % (m / n)]
        print('| ' + ' | '.join(row) + ' |')
    print()
