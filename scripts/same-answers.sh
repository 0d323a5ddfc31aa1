#!/usr/bin/env bash
# Are two checkouts' answers identical? Starts both servers side by side, sends the same
# requests (scripts/answer-hashes.sh) and diffs the hashes. Needs pocketsphinx-testdata (real
# speech for the STT and clone requests; the test command installs it).
#   usage: scripts/same-answers.sh <old-tree> <new-tree>
set -euo pipefail
old=$(realpath "$1"); new=$(realpath "$2")
here=$(dirname "$(realpath "$0")")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
data=/usr/share/pocketsphinx/test/data/librivox
ffmpeg=$(node -e 'console.log(require("@ffmpeg-installer/ffmpeg").path)')
# ~18 s of one real reader: enough speech for a clone, two files' worth for STT.
"$ffmpeg" -loglevel error -y -i $data/sense_and_sensibility_01_austen_64kb-0870.wav \
  -i $data/sense_and_sensibility_01_austen_64kb-0890.wav -i $data/sense_and_sensibility_01_austen_64kb-0920.wav \
  -filter_complex "[0:a][1:a][2:a]concat=n=3:v=0:a=1" "$work/sample.wav"
bash "$here/answer-hashes.sh" "$old" 18801 "$work/old" "$work/sample.wav" > /dev/null &
bash "$here/answer-hashes.sh" "$new" 18802 "$work/new" "$work/sample.wav" > /dev/null &
wait
echo "$(wc -l < "$work/new") answers compared"
diff "$work/old" "$work/new" && echo "identical"
