/*
 * Playground: text to speech (streamed PCM played with the Web Audio API as it arrives),
 * speech to text and voice cloning against the service's own API, with the signed-in session.
 * Plain browser script (no modules, no build step); loaded with <script defer>.
 */
(function () {
  'use strict';

  var $ = function (id) { return document.getElementById(id); };
  var meta = function (name) { var m = document.querySelector('meta[name="' + name + '"]'); return m ? m.getAttribute('content') || '' : ''; };
  var apiBase = (meta('api-base') || '/api/v1').replace(/\/+$/, '');
  var csrfToken = meta('csrf-token');

  // ---------- shared helpers ----------
  function setStatus(el, text, isError) {
    if (!el) return;
    el.textContent = text;
    el.classList.toggle('error', !!isError);
  }

  class ApiError extends Error {}

  /** fetch under apiBase with the session cookie and CSRF header; non-2xx becomes an ApiError. */
  async function api(path, options) {
    var opts = Object.assign({ method: 'GET' }, options || {}, { credentials: 'same-origin' });
    opts.headers = new Headers(opts.headers || {});
    if (csrfToken) opts.headers.set('x-csrf-token', csrfToken);
    var res;
    try {
      res = await fetch(apiBase + path, opts);
    } catch (e) {
      throw new ApiError('Network error: the service could not be reached (' + (e && e.message ? e.message : e) + ').');
    }
    if (!res.ok) throw new ApiError(await errorText(res));
    return res;
  }

  async function errorText(res) {
    var where = 'HTTP ' + res.status + (res.statusText ? ' ' + res.statusText : '');
    var raw = '';
    try { raw = await res.text(); } catch (e) { /* body unreadable: the status alone is said */ }
    try {
      var body = JSON.parse(raw);
      var d = body && body.detail;
      if (d && typeof d === 'object' && d.message) {
        return 'Error (' + where + (d.status ? ', ' + d.status : '') + '): ' + d.message;
      }
      if (typeof d === 'string') return 'Error (' + where + '): ' + d;
    } catch (e) { /* not JSON */ }
    raw = raw.trim();
    return 'Error (' + where + ')' + (raw && raw.length < 300 ? ': ' + raw : '.');
  }

  function describe(e) {
    return e instanceof ApiError ? e.message : 'Unexpected error: ' + (e && e.message ? e.message : String(e));
  }

  /** Disable the button while fn runs; report any failure in statusEl. */
  async function busy(button, statusEl, fn) {
    if (button.disabled) return;
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
    try {
      await fn();
    } catch (e) {
      setStatus(statusEl, describe(e), true);
    } finally {
      button.disabled = false;
      button.removeAttribute('aria-busy');
    }
  }

  var languageNames = null;
  try { languageNames = new Intl.DisplayNames(['en'], { type: 'language' }); } catch (e) { /* codes shown as they are */ }
  function languageName(code) {
    try { return (languageNames && languageNames.of(code)) || code; } catch (e) { return code; }
  }

  function setAudioSrc(audio, url) {
    var old = audio.dataset.objectUrl;
    if (old) URL.revokeObjectURL(old);
    if (url.indexOf('blob:') === 0) audio.dataset.objectUrl = url; else delete audio.dataset.objectUrl;
    audio.src = url;
    audio.load();
  }

  // ---------- voices ----------
  var voiceSelect = $('tts-voice');
  var ttsStatus = $('tts-status');

  function voiceLabel(v) {
    var lang = v.labels && v.labels.language;
    return v.name + (lang ? ' (' + languageName(lang) + ')' : '');
  }

  function voiceOption(v) { return new Option(voiceLabel(v), v.voice_id); }

  function clonesGroup() {
    var g = voiceSelect.querySelector('optgroup[data-group="clones"]');
    if (!g) {
      g = document.createElement('optgroup');
      g.label = 'Your clones';
      g.dataset.group = 'clones';
      voiceSelect.insertBefore(g, voiceSelect.firstChild);
    }
    return g;
  }

  function isEnglish(v) { return /-en$/.test(v.voice_id) || (v.labels && v.labels.language === 'en'); }

  async function loadVoices() {
    setStatus(ttsStatus, 'Loading voices…', false);
    try {
      var data = await (await api('/voices')).json();
      var voices = (data && Array.isArray(data.voices)) ? data.voices : [];
      var clones = voices.filter(function (v) { return v.category === 'cloned'; });
      var presets = voices.filter(function (v) { return v.category !== 'cloned'; });
      voiceSelect.textContent = '';
      if (clones.length) {
        var cg = clonesGroup();
        clones.forEach(function (v) { cg.appendChild(voiceOption(v)); });
      }
      var pg = document.createElement('optgroup');
      pg.label = 'Presets';
      presets.forEach(function (v) { pg.appendChild(voiceOption(v)); });
      voiceSelect.appendChild(pg);
      var preferred = voices.find(isEnglish) || voices[0];
      if (preferred) voiceSelect.value = preferred.voice_id;
      if (!voices.length) setStatus(ttsStatus, 'No voices are available.', true);
      else setStatus(ttsStatus, voices.length + ' voices loaded.', false);
    } catch (e) {
      voiceSelect.textContent = '';
      voiceSelect.appendChild(new Option('Voices could not be loaded', ''));
      setStatus(ttsStatus, 'Voices could not be loaded. ' + describe(e), true);
    }
  }

  // ---------- text to speech ----------
  var speedInput = $('tts-speed');
  var speedValue = $('tts-speed-value');
  var ttsAudio = $('tts-audio');
  var audioCtx = null;
  var playing = [];

  function showSpeed() { if (speedValue) speedValue.textContent = Number(speedInput.value).toFixed(2) + '×'; }

  function stopPlayback() {
    playing.forEach(function (s) { try { s.stop(); } catch (e) { /* already stopped */ } });
    playing = [];
  }

  /** A 44-byte RIFF/WAVE header followed by the s16le mono PCM chunks. */
  function wavBlob(chunks, totalBytes, sampleRate) {
    var h = new DataView(new ArrayBuffer(44));
    var text = function (off, s) { for (var i = 0; i < s.length; i++) h.setUint8(off + i, s.charCodeAt(i)); };
    text(0, 'RIFF'); h.setUint32(4, 36 + totalBytes, true); text(8, 'WAVE');
    text(12, 'fmt '); h.setUint32(16, 16, true); h.setUint16(20, 1, true); h.setUint16(22, 1, true);
    h.setUint32(24, sampleRate, true); h.setUint32(28, sampleRate * 2, true);
    h.setUint16(32, 2, true); h.setUint16(34, 16, true);
    text(36, 'data'); h.setUint32(40, totalBytes, true);
    return new Blob([h.buffer].concat(chunks), { type: 'audio/wav' });
  }

  function pcmToFloat(bytes) {
    var n = bytes.length >> 1;
    var view = new DataView(bytes.buffer, bytes.byteOffset, n * 2);
    var out = new Float32Array(n);
    for (var i = 0; i < n; i++) out[i] = view.getInt16(i * 2, true) / 32768;
    return out;
  }

  async function speak() {
    var voiceId = voiceSelect.value;
    var text = $('tts-text').value;
    var format = $('tts-format').value;
    if (!voiceId) { setStatus(ttsStatus, 'Choose a voice first (the voice list may not have loaded).', true); return; }
    if (!text.trim()) { setStatus(ttsStatus, 'Type some text to speak.', true); return; }
    var body = JSON.stringify({ text: text, model_id: 'svc_v1', voice_settings: { speed: Number(speedInput.value) } });
    var post = { method: 'POST', headers: { 'content-type': 'application/json' }, body: body };
    var voicePath = '/text-to-speech/' + encodeURIComponent(voiceId);
    stopPlayback();
    ttsAudio.pause();

    if (format === 'wav') {
      setStatus(ttsStatus, 'Synthesizing…', false);
      var res = await api(voicePath + '?output_format=wav', post);
      var blob = await res.blob();
      if (blob.type !== 'audio/wav') blob = new Blob([blob], { type: 'audio/wav' });
      var ms = Number(res.headers.get('x-audio-duration-ms'));
      var rate = res.headers.get('x-audio-sample-rate') || '24000';
      setAudioSrc(ttsAudio, URL.createObjectURL(blob));
      var done = 'Done: ' + (ms > 0 ? (ms / 1000).toFixed(1) + ' s of audio' : 'audio') + ' at ' + rate + ' Hz';
      try {
        await ttsAudio.play();
        setStatus(ttsStatus, done + '.', false);
      } catch (e) {
        setStatus(ttsStatus, done + '. The browser did not start playback: press play.', false);
      }
      return;
    }

    var sampleRate = Number((/^pcm_(\d+)$/.exec(format) || [])[1]) || 24000;
    // Created and resumed here, inside the click: browsers only allow audio after a user gesture.
    var Ctx = window.AudioContext || window.webkitAudioContext;
    if (!Ctx) throw new ApiError('This browser has no Web Audio API; choose the WAV format instead.');
    if (!audioCtx) audioCtx = new Ctx();
    var resumed = audioCtx.state === 'suspended' ? audioCtx.resume() : Promise.resolve();
    var ctx = audioCtx;
    var started = performance.now();
    setStatus(ttsStatus, 'Synthesizing…', false);
    var stream = await api(voicePath + '/stream?output_format=' + format, post);
    await resumed;

    var chunks = [];
    var totalBytes = 0;
    var carry = null;
    var nextStartTime = 0;
    var firstAudioMs = -1;

    var play = function (bytes) {
      var samples = pcmToFloat(bytes);
      if (!samples.length) return;
      var buffer = ctx.createBuffer(1, samples.length, sampleRate);
      buffer.getChannelData(0).set(samples);
      var src = ctx.createBufferSource();
      src.buffer = buffer;
      src.connect(ctx.destination);
      nextStartTime = Math.max(ctx.currentTime + 0.05, nextStartTime);
      src.start(nextStartTime);
      nextStartTime += buffer.duration;
      playing.push(src);
      src.onended = function () { playing = playing.filter(function (s) { return s !== src; }); };
    };

    var take = function (chunk) {
      var bytes = chunk;
      if (carry) {
        bytes = new Uint8Array(carry.length + chunk.length);
        bytes.set(carry, 0);
        bytes.set(chunk, carry.length);
        carry = null;
      }
      var even = bytes.length & ~1;
      if (even < bytes.length) carry = bytes.slice(even);
      if (!even) return;
      var pcm = bytes.slice(0, even); // a copy: the reader may reuse its buffer
      chunks.push(pcm);
      totalBytes += even;
      if (firstAudioMs < 0) {
        firstAudioMs = Math.round(performance.now() - started);
        setStatus(ttsStatus, 'Playing… first audio after ' + firstAudioMs + ' ms', false);
      }
      play(pcm);
    };

    var failure = null;
    try {
      if (stream.body && stream.body.getReader) {
        var reader = stream.body.getReader();
        for (;;) {
          var r = await reader.read();
          if (r.done) break;
          if (r.value && r.value.length) take(r.value);
        }
      } else {
        take(new Uint8Array(await stream.arrayBuffer()));
      }
    } catch (e) {
      failure = e;
    }

    var seconds = totalBytes / 2 / sampleRate;
    if (totalBytes > 0) setAudioSrc(ttsAudio, URL.createObjectURL(wavBlob(chunks, totalBytes, sampleRate)));
    if (failure) {
      throw new ApiError('The audio stream broke off after ' + seconds.toFixed(1) + ' s of audio (' +
        (failure && failure.message ? failure.message : failure) + ').' + (totalBytes ? ' What arrived is in the player.' : ''));
    }
    if (!totalBytes) { setStatus(ttsStatus, 'The service returned no audio.', true); return; }
    setStatus(ttsStatus, 'Done: ' + seconds.toFixed(1) + ' s of audio at ' + sampleRate + ' Hz' +
      (firstAudioMs >= 0 ? ' (first audio after ' + firstAudioMs + ' ms).' : '.'), false);
  }

  // ---------- speech to text ----------
  var sttStatus = $('stt-status');

  function base64Text(s) {
    var bin = atob(s);
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new TextDecoder('utf-8').decode(bytes);
  }

  function fmtTime(t) { return typeof t === 'number' && isFinite(t) ? t.toFixed(2) : ''; }

  function showWords(words) {
    var table = $('stt-words');
    var tbody = table.tBodies[0] || table.appendChild(document.createElement('tbody'));
    tbody.textContent = '';
    words.filter(function (w) { return w && w.type === 'word'; }).forEach(function (w) {
      var tr = document.createElement('tr');
      [w.text, fmtTime(w.start), fmtTime(w.end), w.speaker_id || ''].forEach(function (v) {
        var td = document.createElement('td');
        td.textContent = v == null ? '' : String(v);
        tr.appendChild(td);
      });
      tbody.appendChild(tr);
    });
  }

  async function transcribe() {
    var input = $('stt-file');
    var file = input.files && input.files[0];
    if (!file) { setStatus(sttStatus, 'Choose an audio or video file first.', true); input.focus(); return; }
    $('stt-text').textContent = '';
    $('stt-srt').textContent = '';
    showWords([]);
    var form = new FormData();
    form.append('file', file, file.name);
    form.append('model_id', 'scribe_v1');
    form.append('diarize', $('stt-diarize').checked ? 'true' : 'false');
    form.append('additional_formats', JSON.stringify([{ format: 'srt' }]));
    var started = performance.now();
    setStatus(sttStatus, 'Uploading and transcribing ' + file.name + '…', false);
    var data = await (await api('/speech-to-text', { method: 'POST', body: form })).json();
    var words = Array.isArray(data.words) ? data.words : [];
    var text = data.text || '';
    $('stt-text').textContent = text || '(no speech recognised)';
    showWords(words);
    var srt = (Array.isArray(data.additional_formats) ? data.additional_formats : []).find(function (f) {
      return f && (f.requested_format === 'srt' || f.file_extension === 'srt');
    });
    var srtText = '';
    if (srt && typeof srt.content === 'string') {
      try { srtText = srt.is_base64_encoded ? base64Text(srt.content) : srt.content; } catch (e) { srtText = '(the subtitles could not be decoded)'; }
    }
    $('stt-srt').textContent = srtText || '(no subtitles)';
    var count = words.filter(function (w) { return w && w.type === 'word'; }).length;
    setStatus(sttStatus, 'Done in ' + ((performance.now() - started) / 1000).toFixed(1) + ' s: ' + count + ' words' +
      (data.language_code ? ', language ' + data.language_code : '') + '.', false);
  }

  // ---------- voice cloning ----------
  var cloneStatus = $('clone-status');

  async function createClone() {
    var nameInput = $('clone-name');
    var fileInput = $('clone-file');
    var name = nameInput.value.trim();
    var file = fileInput.files && fileInput.files[0];
    if (!name) { setStatus(cloneStatus, 'Give the clone a name.', true); nameInput.focus(); return; }
    if (!file) { setStatus(cloneStatus, 'Choose a voice sample (6 to 30 s of speech).', true); fileInput.focus(); return; }
    var form = new FormData();
    form.append('name', name);
    form.append('files', file, file.name);
    setStatus(cloneStatus, 'Uploading and analysing the sample…', false);
    var added = await (await api('/voices/add', { method: 'POST', body: form })).json();
    var voiceId = added && added.voice_id;
    if (!voiceId) throw new ApiError('The service answered without a voice_id.');
    var voice = { voice_id: voiceId, name: name, category: 'cloned', labels: {}, preview_url: null };
    var detailError = null;
    try {
      voice = await (await api('/voices/' + encodeURIComponent(voiceId))).json();
    } catch (e) {
      detailError = e;
    }
    var existing = Array.prototype.find.call(voiceSelect.options, function (o) { return o.value === voiceId; });
    if (existing) existing.textContent = voiceLabel(voice);
    else clonesGroup().appendChild(voiceOption(voice));
    voiceSelect.value = voiceId;
    var preview = voice.preview_url || apiBase + '/voices/' + encodeURIComponent(voiceId) + '/preview';
    setAudioSrc($('clone-audio'), preview);
    if (detailError) {
      setStatus(cloneStatus, 'Clone "' + name + '" created (' + voiceId + ') and selected above, but its details could not be loaded. ' +
        describe(detailError), true);
    } else {
      var lang = voice.labels && voice.labels.language;
      setStatus(cloneStatus, 'Clone "' + voice.name + '" created' + (lang ? ' (' + languageName(lang) + ')' : '') +
        ' and selected in Text to speech. Press play to hear its preview.', false);
    }
  }

  // ---------- wiring ----------
  function init() {
    if (!voiceSelect) return;
    showSpeed();
    speedInput.addEventListener('input', showSpeed);
    $('tts-speak').addEventListener('click', function () { busy($('tts-speak'), ttsStatus, speak); });
    $('stt-transcribe').addEventListener('click', function () { busy($('stt-transcribe'), sttStatus, transcribe); });
    $('clone-create').addEventListener('click', function () { busy($('clone-create'), cloneStatus, createClone); });
    $('clone-audio').addEventListener('error', function () {
      if ($('clone-audio').getAttribute('src')) setStatus(cloneStatus, 'The clone preview could not be loaded.', true);
    });
    loadVoices();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
