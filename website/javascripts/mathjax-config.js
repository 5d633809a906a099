// MathJax (vendored in javascripts/vendor/mathjax/) typesets two kinds of math and nothing
// else: what pymdownx.arithmatex wrapped in class "arithmatex" on a Markdown page, and the
// $...$ and $$...$$ of a notebook's Markdown cells (class "jp-RenderedMarkdown"). The rest of
// the page (the theme's "md-container") is left alone, so a price or a `$HOME` in prose is
// never read as math; an element of a processed class is searched with all it contains.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"], ["$", "$"]],
    displayMath: [["\\[", "\\]"], ["$$", "$$"]],
    processEscapes: true,
  },
  options: {
    ignoreHtmlClass: "md-container",
    processHtmlClass: "arithmatex|jp-RenderedMarkdown",
  },
};
