// Copy buttons of the developer page: <button data-copy="element-id">. No other page script.
"use strict";
document.addEventListener("click", function (event) {
  var button = event.target.closest("button[data-copy]");
  if (!button) return;
  var source = document.getElementById(button.getAttribute("data-copy"));
  if (!source) return;
  var text = source.value !== undefined ? source.value : source.textContent;
  var done = function (ok) {
    var status = document.getElementById(button.getAttribute("data-copy") + "-copied");
    if (status) status.textContent = ok ? "Copied." : "Copy failed: select the key and copy it by hand.";
  };
  if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(false); });
  else { source.select && source.select(); done(document.execCommand && document.execCommand("copy")); }
});
