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

  // Called when the elements change: after Cytoscape has drawn them, set the view.
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
    }, 60);
    return window.dash_clientside.no_update;
  },

  // Highlight every node whose name (or a collapsed group's member names) contains the
  // query, and centre the first one. Returns the count for the status line.
  graphSearch: function (query, elements) {
    var cy = window.dash_clientside.gradtrace.graphCy();
    if (!cy) { return ""; }
    cy.resize();
    cy.nodes().removeClass("found");
    var q = (query || "").trim().toLowerCase();
    if (!q) { return ""; }
    var hits = cy.nodes().filter(function (n) {
      var label = String(n.data("label") || "").toLowerCase();
      var members = String(n.data("members") || "").toLowerCase();
      return label.indexOf(q) >= 0 || members.indexOf(q) >= 0;
    });
    hits.addClass("found");
    if (hits.length) {
      // A node named so first; else a collapsed group holding one.
      var named = hits.filter(function (n) { return !n.isParent() && String(n.data("label")).toLowerCase().indexOf(q) >= 0; });
      var first = named[0] || hits.filter(function (n) { return !n.isParent(); })[0] || hits[0];
      cy.zoom(Math.max(cy.zoom(), 0.9));
      cy.center(first);
      cy.nodes().unselect();
      first.select();
    }
    return hits.length + " match" + (hits.length === 1 ? "" : "es") + " for \u201c" + query + "\u201d";
  }
});
