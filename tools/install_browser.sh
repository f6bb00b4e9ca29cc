#!/bin/sh
# Headless Chromium for the report's browser test: Debian's `chromium` package, installed when missing.
# Exit 0 when chromium is there afterwards; otherwise say why (not root and no password-less sudo, no apt-get).
set -u
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_browser: no apt-get here; install Chromium and set STEPSCOPE_CHROMIUM to its path" >&2
    exit 3
fi
if [ "$(id -u)" = "0" ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "install_browser: installing chromium needs root (or password-less sudo): apt-get install chromium" >&2
    exit 3
fi
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y --no-install-recommends chromium >/dev/null 2>&1; then
    $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends chromium >/dev/null || {
        echo "install_browser: apt-get could not install chromium" >&2
        exit 3
    }
fi
command -v chromium >/dev/null 2>&1
