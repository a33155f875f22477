// Verdict helper of the widget bench pages. A page registers its check with benchCheck(fn); the
// driver reads benchVerdict() over CDP: "solved" when fn() returns true, else "not solved: <why>".
// Pages count only trusted events (real input), so no script on the page can fake a solution.
(function () {
  let check = function () { return 'no check registered'; };
  window.benchCheck = function (fn) { check = fn; };
  window.benchVerdict = function () {
    try {
      const r = check();
      return r === true ? 'solved' : 'not solved: ' + r;
    } catch (e) {
      return 'not solved: the check threw ' + e;
    }
  };
})();
