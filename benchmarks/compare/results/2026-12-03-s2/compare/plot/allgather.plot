plot '/work/q4/final/compare/plot/allgather.np2.coll.dat' using 1:2 with linespoints lc 1 lw 3 dt 1 pt 1 title 'coll np=2', \
     '/work/q4/final/compare/plot/allgather.np2.ompi.dat' using 1:2 with linespoints lc 2 lw 1 dt 1 pt 1 title 'Open MPI np=2', \
     '/work/q4/final/compare/plot/allgather.np4.coll.dat' using 1:2 with linespoints lc 1 lw 3 dt 2 pt 2 title 'coll np=4', \
     '/work/q4/final/compare/plot/allgather.np4.ompi.dat' using 1:2 with linespoints lc 2 lw 1 dt 2 pt 2 title 'Open MPI np=4'
