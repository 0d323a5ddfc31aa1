#!/usr/bin/env bash
# Installs everything the service and its tests need on a fresh machine: npm packages from the
# lock file, and (where apt-get is usable) the Debian packages some engines use. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: engines that are not on npm. Missing ones are reported by /readyz and the
# start-up log instead of stopping the service, so a machine without apt still starts.
# ffmpeg: decodes every speech-to-text and clone upload (untrusted input); Debian's package gets
# security updates through apt, unlike the 2018 static build of npm @ffmpeg-installer/ffmpeg,
# which the service falls back to (warning at start-up and in /readyz) only when this is missing.
# libespeak-ng1: espeak-ng's native library, 3.4x less CPU per audio second than the bundled
# build (which speaks without it). Tests need a few more (scripts/test.sh sets
# SPEECH_TEST_APT_PACKAGES): pocketsphinx-testdata (real human English speech), nginx-light (the
# HTTP/1.0 proxy test runs a private nginx) and chromium (the site's pages are tested in a real
# browser through playwright-core).
# Apertium (chunk translation): the engine and the pairs Debian has for English, Spanish,
# Catalan and Portuguese; the service lists the pairs it finds (GET /api/v1/translate/languages).
apt_packages=(${SPEECH_APT_PACKAGES:-ffmpeg libespeak-ng1 pocketsphinx libpocketsphinx3 pocketsphinx-en-us apertium apertium-eng-spa apertium-eng-cat apertium-spa-cat apertium-es-pt} ${SPEECH_TEST_APT_PACKAGES:-})
if [ "${#apt_packages[@]}" -gt 0 ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  missing=()
  for p in "${apt_packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
      || { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; } \
      || echo "setup: could not install ${missing[*]}; the engines that need them stay off"
  fi
fi

# npm ci when the lock file matches; it never needs anything but the npm registry
# (.npmrc switches off onnxruntime-node's CUDA download).
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
