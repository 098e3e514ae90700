# plot.gp - busbw against size for one collective (called by run.sh):
#   gnuplot -e "outfile='X.png'; coll='allreduce'; plotfile='plot/allreduce.plot'" plot.gp
# plotfile (written by table.py) holds the plot command: one line per
# library and rank count (solid: fewer ranks, dashed: more; coll bold).
set terminal pngcairo size 1100,650 noenhanced font ",10"
set output outfile
set title sprintf("%s: busbw vs size (float32, out-of-place, median of runs)", coll)
set logscale x 2
set format x "%.0b%B"
set xlabel "size (bytes)"
set ylabel "busbw (GB/s)"
set key left top
set grid
load plotfile
