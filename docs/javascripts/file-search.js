// Opened from disk (file://), a browser does not run the search's worker script: say how to search instead
// of showing a box that finds nothing. Served over HTTP (python -m http.server --directory site), search works.
document.addEventListener("DOMContentLoaded", function () {
  if (window.location.protocol !== "file:") {
    return;
  }
  document.querySelectorAll("input.md-search__input").forEach(function (box) {
    box.placeholder = "Search: serve the site (python -m http.server --directory site)";
    box.title = "Browsers do not run the search's worker on pages opened from disk; serve the site to search it.";
    box.disabled = true;
  });
});
