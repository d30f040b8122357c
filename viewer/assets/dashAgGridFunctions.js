// Value formatters for the gradtrace grids (times arrive in microseconds, memory in bytes).
// They return plain strings: AG Grid renders them as text, never as HTML.
var dagfuncs = (window.dashAgGridFunctions = window.dashAgGridFunctions || {});

dagfuncs.gtTime = function (us) {
  if (us === null || us === undefined || isNaN(us)) { return ""; }
  var a = Math.abs(us);
  if (a >= 1e6) { return (us / 1e6).toFixed(3) + " s"; }
  if (a >= 1e3) { return (us / 1e3).toFixed(3) + " ms"; }
  return us.toFixed(3) + " us";
};

dagfuncs.gtMs = function (ms) {
  if (ms === null || ms === undefined || isNaN(ms)) { return ""; }
  return ms.toFixed(4);
};

dagfuncs.gtPct = function (p) {
  if (p === null || p === undefined || isNaN(p)) { return ""; }
  return p.toFixed(2) + "%";
};

dagfuncs.gtNum = function (v) {
  if (v === null || v === undefined || isNaN(v)) { return "—"; }
  return Number(v).toFixed(3);
};

dagfuncs.gtInt = function (v) {
  if (v === null || v === undefined || isNaN(v)) { return ""; }
  return Number(v).toLocaleString("en-US");
};

dagfuncs.gtBytes = function (b) {
  if (b === null || b === undefined || isNaN(b)) { return ""; }
  var a = Math.abs(b), sign = b < 0 ? "-" : "";
  if (a >= 1073741824) { return sign + (a / 1073741824).toFixed(2) + " GB"; }
  if (a >= 1048576) { return sign + (a / 1048576).toFixed(2) + " MB"; }
  if (a >= 1024) { return sign + (a / 1024).toFixed(2) + " KB"; }
  return sign + a + " B";
};

dagfuncs.gtFlops = function (v) {
  if (!v) { return "--"; }
  var units = ["", "K", "M", "G", "T", "P"], k = 0, a = Math.abs(v);
  while (k + 1 < units.length && a >= Math.pow(1000, k + 1)) { k += 1; }
  return k === 0 ? String(v) : (v / Math.pow(1000, k)).toFixed(3) + " " + units[k];
};
