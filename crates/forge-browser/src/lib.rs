//! forge-browser: The Chromium manager, page observation and the browser_* tools.
