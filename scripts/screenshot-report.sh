#!/usr/bin/env bash
# Looks at the comparison report as a person would, in headless Chromium at 1280 px wide:
# screenshots of the first screen, of the whole page (up to 16,000 px), of each chart and of two
# timelines; then checks in the browser, with its real fonts, that the page does not scroll
# sideways and that no text of a chart or timeline runs into another text or off its canvas.
#
#   bash scripts/screenshot-report.sh [OUT_DIR] [compare arguments...]
#   REPORT=report bash scripts/screenshot-report.sh [OUT_DIR]     # an existing report folder
#
# Exits 1 when the browser finds a problem (listed on stdout). Installs Debian's chromium when it
# is missing. Not part of CI (it needs a browser); `cargo test` runs the same layout checks with
# estimated text widths (reports::audit). Never sets RUSTFLAGS (that would drop
# .cargo/config.toml's --cfg madsim).
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUSTFLAGS

out="${1:-report-screenshots}"
shift || true
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
mkdir -p "$out"

if ! command -v chromium >/dev/null 2>&1; then
  echo "installing chromium (Debian package)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [[ -n "${REPORT:-}" ]]; then
  report="$(cd "$REPORT" && pwd)"
else
  report="$work/report"
  cargo run --release --quiet -- compare "$@" --out "$report" >/dev/null
fi

chrome() {
  timeout 300 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$work/profile" --hide-scrollbars "$@" 2>/dev/null
}

# Screenshots: the first screen, the whole page, each chart, a timeline with faults and one with
# Sentinel decisions (when the report has them).
chrome --window-size=1280,1000 --screenshot="$out/first-screen.png" "file://$report/index.html"
chrome --window-size=1280,16000 --screenshot="$out/page.png" "file://$report/index.html"
for svg in "$report"/charts/*.svg; do
  width=$(grep -m1 -o 'width="[0-9]*"' "$svg" | tr -dc 0-9)
  tall=$(grep -m1 -o 'height="[0-9]*"' "$svg" | tr -dc 0-9)
  name="$(basename "$svg" .svg)"
  chrome --window-size="$width,$((tall > 16000 ? 16000 : tall))" --screenshot="$out/chart-$name.png" "file://$svg"
done
faults=$(ls "$report"/runs/nemesis-*/*/seed-*/timeline.svg 2>/dev/null | head -1 || true)
sentinels=$(grep -l '+switch-master' "$report"/runs/*/*/seed-*/timeline.svg 2>/dev/null | head -1 || true)
for t in $faults $sentinels; do
  tall=$(grep -m1 -o 'height="[0-9]*"' "$t" | tr -dc 0-9)
  name="$(echo "${t#"$report"/runs/}" | tr / _ )"
  chrome --window-size="1200,$tall" --screenshot="$out/timeline-${name%.svg}.png" "file://$t"
done

# The browser's own measurements: a copy of the page with every chart and timeline inlined and
# a script that writes what it finds into the page, read back with --dump-dom.
python3 - "$report" "$work/check.html" <<'EOF'
import glob, os, sys
report, target = sys.argv[1], sys.argv[2]
page = open(os.path.join(report, "index.html"), encoding="utf-8").read()
svgs = sorted(glob.glob(os.path.join(report, "charts", "*.svg")))
svgs += sorted(glob.glob(os.path.join(report, "runs", "*", "*", "seed-*", "timeline.svg")))
extra = "".join(
    '<div class="audit-svg" data-file="%s">%s</div>' % (os.path.relpath(p, report), open(p, encoding="utf-8").read())
    for p in svgs
)
script = r"""
<script>
(function () {
  const problems = [];
  if (document.documentElement.scrollWidth > 1280) {
    problems.push("the page is " + document.documentElement.scrollWidth + " px wide: it scrolls sideways at 1280 px");
  }
  function check(svg, where) {
    const box = svg.getBoundingClientRect();
    const scale = box.width / svg.width.baseVal.value || 1;
    const texts = Array.from(svg.querySelectorAll("text")).filter(t => t.textContent.trim() !== "");
    const rects = texts.map(t => t.getBoundingClientRect());
    texts.forEach((t, i) => {
      const r = rects[i];
      if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5) {
        problems.push(where + ": text " + JSON.stringify(t.textContent.trim()) + " runs off the canvas");
      }
      for (let j = i + 1; j < texts.length; j++) {
        const q = rects[j];
        // Glyph boxes include the line's leading: allow 1 px (in the chart's own pixels).
        const slack = 1 * scale;
        if (r.left + slack < q.right && q.left + slack < r.right && r.top + 2 * slack < q.bottom && q.top + 2 * slack < r.bottom) {
          problems.push(where + ": text " + JSON.stringify(t.textContent.trim()) + " overlaps " + JSON.stringify(texts[j].textContent.trim()));
        }
      }
    });
  }
  document.querySelectorAll("main figure svg").forEach((svg, i) => check(svg, "page chart " + (i + 1)));
  document.querySelectorAll("div.audit-svg").forEach(div => {
    const svg = div.querySelector("svg");
    if (svg) check(svg, div.dataset.file);
  });
  const pre = document.createElement("pre");
  pre.id = "audit";
  // The markers are built here so that the script's own text never matches them.
  pre.textContent = ["AUDIT", "BEGIN"].join("-") + "\n" + problems.join("\n") + "\n" + ["AUDIT", "END"].join("-");
  document.body.appendChild(pre);
})();
</script>
"""
page = page.replace("</body>", extra + script + "</body>")
open(target, "w", encoding="utf-8").write(page)
EOF
chrome --window-size=1280,1000 --virtual-time-budget=10000 --dump-dom "file://$work/check.html" >"$work/dom.html"
problems=$(sed -n '/AUDIT-BEGIN/,/AUDIT-END/p' "$work/dom.html" | grep -v 'AUDIT-' | grep -v '^$' || true)
echo "screenshots in $out: $(ls "$out" | tr '\n' ' ')"
if ! grep -q AUDIT-END "$work/dom.html"; then
  echo "the browser's check did not run" >&2
  exit 1
fi
if [[ -n "$problems" ]]; then
  echo "the browser found $(echo "$problems" | wc -l) problem(s):"
  echo "$problems"
  exit 1
fi
echo "the browser found no text over text or off a canvas, and no sideways scrolling at 1280 px"
