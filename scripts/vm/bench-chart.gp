# SPDX-License-Identifier: GPL-2.0
# scripts/bench's chart: IOPS of each adapter over virtio-scsi's, one
# cluster per backing:job, from the DAT that bench-report.py wrote.
#   gnuplot -e "dat='chart.dat'; png='chart.png'; ncol=8" bench-chart.gp
set terminal pngcairo size 1400,600 font ",10"
set output png
set title "IOPS relative to virtio-scsi (iothread, aio=native), same run; nested: ratios, not hardware figures"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key outside right top vertical
set grid ytics
set yrange [0:*]
set ylabel "x virtio-scsi IOPS"
set xtics rotate by -30 nomirror
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb "black"
# ncol: the DAT's columns (scripts/bench passes them: 9 with ours-mq1q)
if (!exists("ncol")) ncol = 8
plot for [i=2:ncol] dat using i:xtic(1) title columnheader(i)
