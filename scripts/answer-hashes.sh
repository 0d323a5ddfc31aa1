#!/usr/bin/env bash
# One tree's answers to a fixed set of requests, as hashes: for refactors that must not change
# behaviour. Run it on two checkouts (e.g. a clean clone at the old commit and this one) and
# diff the outputs; scripts/same-answers.sh does both and the diff.
#   usage: scripts/answer-hashes.sh <tree> <port> <out-file> <sample.wav>
# Covers: TTS sync/stream/timestamps in several formats, every preset voice, expressive tags,
# language and speed, previews; STT with diarization and a clone made from <sample.wav> (real
# speech, 6-30 s) and its synthesis. Each server runs on embedded PGlite in a temporary DATA_DIR.
set -u
tree=$1; port=$2; out=$3; sample=$4
data=$(mktemp -d)
cd $tree
PORT=$port HOST=127.0.0.1 DATA_DIR=$data WORKERS=1 LOG_LEVEL=warn node --import tsx runtime/main.ts > $out.server.log 2>&1 &
pid=$!
for i in $(seq 1 120); do curl -sf http://127.0.0.1:$port/readyz >/dev/null && break; sleep 1; done
key=$(DATA_DIR=$data node --import tsx runtime/admin.ts create-user --name ident --credits 1000000 --json | tail -1 | python3 -c 'import json,sys;print(json.load(sys.stdin)["api_key"])')
B=http://127.0.0.1:$port/api/v1
h=(-H "xi-api-key: $key" -H "content-type: application/json")
: > $out
req() { # name, path, body
  curl -s "${h[@]}" -X POST "$B$2" -d "$3" -o $out.$1.bin -w "%{http_code}"; echo " $1 $(sha256sum < $out.$1.bin | cut -c1-16) $(stat -c %s $out.$1.bin)" >> $out; }
T='{"text":"Hello there. This is a test of the speech service, with two sentences! And a third one?"}'
req wav "/text-to-speech/mari" "$T"
req mp3q "/text-to-speech/mari?output_format=pcm_16000" "$T"
req ulaw "/text-to-speech/mari?output_format=ulaw_8000" "$T"
req stream "/text-to-speech/mari/stream?output_format=pcm_24000" "$T"
req ts "/text-to-speech/mari/with-timestamps" "$T"
req streamts "/text-to-speech/mari/stream/with-timestamps" "$T"
voices=$(curl -s "${h[@]}" $B/voices | python3 -c 'import json,sys;print(" ".join(v["voice_id"] for v in json.load(sys.stdin)["voices"]))')
for v in $voices; do req "v_$v" "/text-to-speech/$v?output_format=pcm_22050" '{"text":"The quick brown fox jumps over the lazy dog. Ninety nine balloons."}'; done
req expr "/text-to-speech/mari?output_format=pcm_22050" '{"text":"[rõõmus] Tere! [sosin] See on saladus. [naer] [laul] La la la. [ohe]"}'
req lang "/text-to-speech/mari?output_format=pcm_22050&language_code=en" '{"text":"Language override works here."}'
req speed "/text-to-speech/mari?output_format=pcm_22050" '{"text":"Faster speech please.","voice_settings":{"speed":1.5}}'
for v in $(echo $voices | cut -d' ' -f1-2); do curl -s -H "xi-api-key: $key" $B/voices/$v/preview -o $out.prev_$v.bin; echo "200 prev_$v $(sha256sum < $out.prev_$v.bin | cut -c1-16)" >> $out; done
# STT of a fixed file
curl -s -H "xi-api-key: $key" -F model_id=scribe_v1 -F file=@$sample -F diarize=true $B/speech-to-text | python3 -c 'import json,sys;d=json.load(sys.stdin);d.pop("transcription_id",None);print("stt", json.dumps(d,sort_keys=True)[:20000])' | sha256sum | sed 's/^/stt /' >> $out
# Clone from the fixed sample, then synthesize with it
cid=$(curl -s -H "xi-api-key: $key" -F name=ident -F files=@$sample $B/voices/add | python3 -c 'import json,sys;print(json.load(sys.stdin)["voice_id"])')
curl -s "${h[@]}" -X POST "$B/text-to-speech/$cid?output_format=pcm_22050" -d '{"text":"The clone speaks this sentence."}' -o $out.clone.bin; echo "clone $(sha256sum < $out.clone.bin | cut -c1-16) $(stat -c %s $out.clone.bin)" >> $out
curl -s -H "xi-api-key: $key" $B/voices/$cid | python3 -c 'import json,sys;d=json.load(sys.stdin);print("clonejson", d.get("labels"), d.get("name"))' >> $out
kill $pid; wait $pid 2>/dev/null; rm -rf $data
