// SVG charts of the HTTP and in-process result tables (written next to results.json),
// rendered in Node by ECharts' server-side SVG renderer: no browser, no canvas.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as echarts from 'echarts';
import type { Results } from './scenarios.js';
import { fmtRatio, fmtUs } from './util.js';

interface Bar { label: string; value: number; note: string }

/** A horizontal bar chart, first bar on top; `log` for ratios spanning decades. */
function barChart(title: string, subtitle: string, axis: string, bars: Bar[], log: boolean, marks: number[]): string {
  const width = 1100, height = 110 + bars.length * 34;
  const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, width, height });
  try {
    const rows = [...bars].reverse();
    chart.setOption({
      animation: false,
      backgroundColor: '#ffffff',
      title: { text: title, subtext: subtitle, left: 10, top: 6, textStyle: { fontSize: 15 }, subtextStyle: { fontSize: 11 } },
      grid: { left: 400, right: 200, top: 64, bottom: 44 },
      xAxis: { type: log ? 'log' : 'value', name: axis, nameLocation: 'middle', nameGap: 24, ...(log ? { logBase: 10 } : { min: 0 }) },
      yAxis: { type: 'category', data: rows.map((b) => b.label), axisLabel: { fontSize: 11, width: 390, overflow: 'truncate' } },
      series: [{
        type: 'bar', barMaxWidth: 22,
        data: rows.map((b) => ({ value: b.value, label: { show: true, position: 'right', formatter: `${fmtRatio(b.value)}  ${b.note}`, fontSize: 11 } })),
        itemStyle: { color: '#4878a8' },
        markLine: { silent: true, symbol: 'none', label: { formatter: '{c}x', fontSize: 10 }, lineStyle: { color: '#a04040', type: 'dashed' }, data: marks.map((x) => ({ xAxis: x })) },
      }],
    });
    return chart.renderToSVGString();
  } finally {
    chart.dispose();
  }
}

/** Writes http.svg and inprocess.svg (whichever half ran) into `dir`; returns the paths. */
export function writeCharts(results: Results, dir: string, about: string): string[] {
  const written: string[] = [];
  const h = results.http;
  if (h) {
    const bars: Bar[] = [
      ...(h.bareBuilt ? [{ label: 'bare uWS, bodies built per request', value: h.bareBuilt.rps / h.bare.rps, note: `p50 ${fmtUs(h.bareBuilt.p50us)} / p99 ${fmtUs(h.bareBuilt.p99us)}` }] : []),
      ...h.rows.map((r) => ({ label: r.title, value: r.ratioToBare, note: `p50 ${fmtUs(r.result.p50us)} / p99 ${fmtUs(r.result.p99us)}` })),
    ];
    const file = join(dir, 'http.svg');
    writeFileSync(file, barChart('svcdb over HTTP: req/s as a ratio to bare uWS (same run)',
      `${about}; bare uWS ${Math.round(h.bare.rps).toLocaleString('en-US')} req/s = 1x`, 'req/s / bare uWS req/s', bars, false, [0.3, 0.6, 1]));
    written.push(file);
  }
  const rows = (results.inProcess ?? []).filter((r) => r.ratio !== undefined);
  if (rows.length > 0) {
    const bars = rows.map((r) => ({ label: r.title, value: r.ratio!, note: `vs ${r.peerName}` }));
    const file = join(dir, 'inprocess.svg');
    writeFileSync(file, barChart('svcdb in-process: ops/s as a ratio to the peer (same run)', about, 'svcdb ops/s / peer ops/s (log scale)', bars, true, [1]));
    written.push(file);
  }
  return written;
}
