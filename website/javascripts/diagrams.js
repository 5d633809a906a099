// Draws each ```mermaid block (a <pre class="diagram"> holding the diagram's text) as an SVG,
// in place, with the vendored Mermaid, loaded only on a page that has a diagram. A diagram
// that does not parse keeps its text and is reported as a console error, which the site's
// browser test counts as a failure.
// When the diagrams are drawn and MathJax has typeset the page, <html> gets
// data-rendered="true": the moment a reader (or the browser test) sees the finished page.
const vendor = new URL("vendor/", document.currentScript.src);

function loadScript(url) {
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = url;
    script.onload = resolve;
    script.onerror = () => reject(new Error(`could not load ${url}`));
    document.head.append(script);
  });
}

async function drawDiagrams() {
  const blocks = document.querySelectorAll("pre.diagram");
  if (blocks.length === 0) return;
  await loadScript(new URL("mermaid.min.js", vendor));
  mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });
  for (const [index, block] of blocks.entries()) {
    try {
      const { svg } = await mermaid.render(`diagram-${index}`, block.textContent);
      block.innerHTML = svg;
    } catch (error) {
      console.error(`Mermaid diagram ${index + 1} does not parse: ${error.message || error}`);
    }
  }
}

const diagramsDrawn = drawDiagrams().catch(error => console.error(`Mermaid: ${error.message}`));
Promise.allSettled([diagramsDrawn, MathJax.startup.promise]).then(() => {
  document.documentElement.dataset.rendered = "true";
});
