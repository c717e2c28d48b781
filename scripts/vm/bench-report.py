# SPDX-License-Identifier: GPL-2.0
"""scripts/bench's report: RAW (the VPS-REPORT lines of a run, one set of
key=value pairs per line, the guest's and the host VM's halves joined by
tag) -> the tables appended to MD, and DAT (IOPS relative to virtio-scsi
per job and backing, one column per adapter) for the chart.

    python3 bench-report.py RAW MD DAT
"""
import collections
import statistics
import sys

ADAPTERS = ['ours-vmw', 'ours-mq', 'pvscsi', 'virtio-scsi', 'vhost-scsi', 'lsi', 'megasas',
            'ours-mq1q', 'vhost-scsi1q', 'ours-mqpoll']
# with a multi-vCPU guest: each adapter with a queue per vCPU and the same
# adapter on one queue, for the gain of the queues in the same run
QUEUE_PAIRS = [('ours-mq', 'ours-mq1q'), ('vhost-scsi', 'vhost-scsi1q')]
ANCHOR = 'virtio-scsi'
JOBS = {
    'rr1': '4k randread QD 1', 'rr32': '4k randread QD 32',
    'rw1': '4k randwrite QD 1', 'rw32': '4k randwrite QD 32',
    'sr': '128k read QD 8', 'sw': '128k write QD 8',
    'rr2j': '4k randread 2 jobs x QD 16',
}
BACKINGS = {'null': 'null_blk', 'file': 'file on ext4'}


def load(path):
    by_tag = collections.defaultdict(dict)
    for line in open(path):
        f = dict(kv.split('=', 1) for kv in line.split() if '=' in kv)
        if 'tag' in f:
            by_tag[f['tag']].update(f)
    runs = collections.defaultdict(list)
    for f in by_tag.values():
        if 'dev' in f and 'exits' in f and float(f.get('ios', 0)) > 0:
            runs[(f['backing'], f['job'], f['dev'])].append(f)
    return runs


def iops(rs):
    return statistics.median(float(r['iops']) for r in rs)


def per_io(rs, key):
    return statistics.median(float(r[key]) / float(r['ios']) for r in rs)


def ours(d, rs, key):
    """the module's count per I/O: ours only, and runs that recorded it"""
    if not d.startswith('ours') or not all(key in r for r in rs):
        return '-'
    return f'{per_io(rs, key):.2f}'


def windows(runs):
    """The host VM's counter windows, one per run: a line for the report.
    A window reaches from the host VM's read at the guest's start mark to
    its read at the end mark, so it is as long as fio's run plus the
    marks' round trips; one much longer held idle time too, whose exits
    and CPU count in that run's per-I/O figures (the 2026-12-07 all-job
    run's first window: 24.4 s for 4 s of fio).  Named, not dropped, with
    the guest's own measure of its run where it gave one (guest_ms: from
    the answer to its start mark to fio's end) and of the marks' exchanges
    (from printing a mark to its answer): a long window beside a run of
    the usual length lost its time in an exchange, or between them."""
    def guest(r):
        if not r.get('guest_ms', '').isdigit():
            return ''
        g = f', the guest\'s run {r["guest_ms"]} ms'
        if r.get('mark_start_ms', '').isdigit() and r.get('mark_end_ms', '').isdigit():
            g += f', its marks\' exchanges {r["mark_start_ms"]} + {r["mark_end_ms"]} ms'
        return g
    ws = sorted((int(r['win_ms']), r['tag'], guest(r))
                for rs in runs.values() for r in rs if r.get('win_ms', '').isdigit())
    if not ws:
        return 'Windows: none recorded.\n'
    med = statistics.median(x for x, _, _ in ws)
    long_ = [f'{t} ({x} ms{g})' for x, t, g in ws if x > 2 * med]
    return (f'Windows (the host VM\'s counters read around each run): median {med:.0f} ms, '
            f'{ws[0][0]}-{ws[-1][0]} ms; longer than twice the median (idle time in '
            f'that run\'s per-I/O figures): {", ".join(long_) if long_ else "none"}.\n')


def main():
    raw, md, dat = sys.argv[1:4]
    runs = load(raw)
    if not runs:
        sys.exit('bench-report: no complete run in ' + raw)
    jobs = [j for j in JOBS if any(k[1] == j for k in runs)]
    backings = [b for b in BACKINGS if any(k[0] == b for k in runs)]
    # ours-mq1q and vhost-scsi1q are there only with a multi-vCPU guest
    adapters = [d for d in ADAPTERS if any(k[2] == d for k in runs)]
    out = open(md, 'a')
    w = out.write
    w('\nMedians of the rounds; IOPS spread = min-max over the rounds. '
      f'"x {ANCHOR}": IOPS over {ANCHOR}\'s in the same run. Per I/O: KVM exits, '
      'MMIO exits, interrupt injections (the host VM\'s counters), guest '
      'interrupts, host-VM CPU time in microseconds; for ours also the '
      'module\'s own counts: doorbells the guest rang (bell/IO, each a VM '
      'exit), rounds they started (kick/IO: the eventfd folds the doorbells '
      'rung before the worker runs) and interrupts it raised (call/IO).\n')
    w('\n' + windows(runs))
    chart = []
    for b in backings:
        w(f'\n## {BACKINGS[b]}\n')
        for j in jobs:
            base = runs.get((b, j, ANCHOR))
            bi = iops(base) if base else 0
            w(f'\n### {JOBS[j]}\n\n')
            w(f'| adapter | IOPS | spread | x {ANCHOR} | p50 us | p99 us '
              '| exits/IO | MMIO/IO | inj/IO | gIRQ/IO | CPU us/IO | bell/IO | kick/IO | call/IO |\n')
            w('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n')
            row = [f'{b}:{j}']
            for d in adapters:
                rs = runs.get((b, j, d))
                if not rs:
                    w(f'| {d} | (no run) ||||||||||||| \n')
                    row.append('0')
                    continue
                each = [float(r['iops']) for r in rs]
                m = iops(rs)
                ratio = m / bi if bi else 0
                row.append(f'{ratio:.3f}')
                w(f'| {d} | {m:.0f} | {min(each):.0f}-{max(each):.0f} | {ratio:.2f} '
                  f'| {statistics.median(float(r["p50_us"]) for r in rs):.0f} '
                  f'| {statistics.median(float(r["p99_us"]) for r in rs):.0f} '
                  f'| {per_io(rs, "exits"):.2f} | {per_io(rs, "mmio_exits"):.2f} '
                  f'| {per_io(rs, "irq_injections"):.2f} | {per_io(rs, "guest_irqs"):.2f} '
                  f'| {per_io(rs, "cpu_ms") * 1000:.0f} '
                  f'| {ours(d, rs, "vps_bells")} | {ours(d, rs, "vps_kicks")} '
                  f'| {ours(d, rs, "vps_calls")} |\n')
            chart.append(row)
    pairs = [(m, o) for m, o in QUEUE_PAIRS if m in adapters and o in adapters]
    if pairs:
        w('\n## The gain of the queues\n\nMedian IOPS with a queue per vCPU over '
          'the same adapter\'s on one queue, same run (IOPS: queues / one queue).\n\n')
        w('| backing | job | ' + ' | '.join(f'{m} / {o}' for m, o in pairs) + ' |\n')
        w('|---|---|' + '---:|' * len(pairs) + '\n')
        for b in backings:
            for j in jobs:
                cells = []
                for m, o in pairs:
                    rm, ro = runs.get((b, j, m)), runs.get((b, j, o))
                    if not rm or not ro:
                        cells.append('-')
                        continue
                    im, io = iops(rm), iops(ro)
                    cells.append(f'{im / io:.2f}x ({im:.0f} / {io:.0f})' if io else '-')
                w(f'| {BACKINGS[b]} | {JOBS[j]} | ' + ' | '.join(cells) + ' |\n')
    w('\nIOPS and CPU time under nested TCG are not hardware figures; '
      'per-I/O counts and the ratios of one run are.\n')
    out.close()
    with open(dat, 'w') as f:
        f.write('case ' + ' '.join(adapters) + '\n')
        for row in chart:
            f.write(' '.join(row) + '\n')


if __name__ == '__main__':
    main()
