// The autograd graph page's browser side: open at a readable zoom, and search.
// Cytoscape's own "fit" would shrink a tall graph until its labels cannot be read, so the
// first view fits the graph's width (between 45% and 110%) and shows its top, where the
// forward pass starts.
window.dash_clientside = window.dash_clientside || {};
window.dash_clientside.gradtrace = Object.assign(window.dash_clientside.gradtrace || {}, {
  graphCy: function () {
    var el = document.getElementById("gr-cyto");
    return el && el._cyreg && el._cyreg.cy;
  },

  // Called when the elements change: after Cytoscape has drawn them, set the view (on the
  // search's first match while a search is on).
  graphView: function (elements) {
    var self = window.dash_clientside.gradtrace;
    setTimeout(function () {
      var cy = self.graphCy();
      if (!cy || cy.nodes().length === 0) { return; }
      // Text above the canvas may have moved it: Cytoscape caches where it is on the page.
      cy.resize();
      var bb = cy.elements().boundingBox();
      var z = Math.max(0.45, Math.min(1.1, (cy.width() - 40) / Math.max(bb.w, 1)));
      cy.zoom(z);
      cy.pan({x: (cy.width() - bb.w * z) / 2 - bb.x1 * z, y: 16 - bb.y1 * z});
      self.markSearch(cy, true);
    }, 60);
    return window.dash_clientside.no_update;
  },

  // Mark every node whose name (or a collapsed group's member names) contains the search;
  // with ``centre``, select the first match and centre it.
  markSearch: function (cy, centre) {
    var q = window.dash_clientside.gradtrace._query || "";
    cy.nodes().removeClass("found");
    if (!q) { return; }
    var hits = cy.nodes().filter(function (n) { return window.dash_clientside.gradtrace.matches(n.data(), q); });
    hits.addClass("found");
    if (!hits.length || !centre) { return; }
    // A node named so first; else a collapsed group holding one.
    var named = hits.filter(function (n) { return !n.isParent() && String(n.data("label")).toLowerCase().indexOf(q) >= 0; });
    var first = named[0] || hits.filter(function (n) { return !n.isParent(); })[0] || hits[0];
    cy.zoom(Math.max(cy.zoom(), 0.9));
    cy.center(first);
    cy.nodes().unselect();
    first.select();
  },

  matches: function (data, q) {
    return String(data.label || "").toLowerCase().indexOf(q) >= 0 ||
           String(data.members || "").toLowerCase().indexOf(q) >= 0;
  },

  // The search box: a new search has the server expand the groups around what it finds
  // (new elements, then graphView centres the first match); the marks are set here too, for
  // a search that opened nothing. Returns the count for the status line, counted in the
  // elements given.
  graphSearch: function (query, elements) {
    var self = window.dash_clientside.gradtrace;
    var q = (query || "").trim().toLowerCase();
    var isNew = q !== self._query;
    self._query = q;
    setTimeout(function () {
      var cy = self.graphCy();
      if (cy) { cy.resize(); self.markSearch(cy, isNew); }
    }, 60);
    if (!q) { return ""; }
    var n = (elements || []).filter(function (e) { return !e.data.source && self.matches(e.data, q); }).length;
    return n + " match" + (n === 1 ? "" : "es") + " for \u201c" + query + "\u201d";
  }
});
