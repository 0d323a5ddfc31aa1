/*
 * Playground: live transcription from the microphone over the realtime speech-to-text socket.
 * The page never holds an API key: it mints a `realtime_scribe` single-use token with its
 * session cookie and CSRF token, opens `{api-base}/speech-to-text/realtime?token=…` with
 * commit_strategy=vad, and sends the microphone as pcm_16000 (s16le, mono) in base64
 * `input_audio_chunk` frames of 100 ms. Capture: getUserMedia into an AudioWorklet
 * (/static/mic-worklet.js; a ScriptProcessor where worklets are missing), resampled here from
 * the context's rate (usually 48 kHz) to 16 kHz. Partials show in grey and are replaced as they
 * change; each committed transcript becomes a line. Plain browser script, loaded with defer.
 */
(function () {
  'use strict';

  var $ = function (id) { return document.getElementById(id); };
  var meta = function (name) { var m = document.querySelector('meta[name="' + name + '"]'); return m ? m.getAttribute('content') || '' : ''; };
  var apiBase = (meta('api-base') || '/api/v1').replace(/\/+$/, '');
  var csrfToken = meta('csrf-token');

  var RATE = 16000;
  var CHUNK_SAMPLES = RATE / 10; // 100 ms per frame, as ElevenLabs suggests
  var STOP_WAIT_MS = 5000; // after Stop, how long the last commit may take before the socket is closed anyway

  var startButton = $('mic-start');
  var stopButton = $('mic-stop');
  var statusEl = $('mic-status');
  var linesEl = $('mic-lines');
  var partialEl = $('mic-partial');
  var session = null; // the running one, or null

  function setStatus(text, isError) {
    statusEl.textContent = text;
    statusEl.classList.toggle('error', !!isError);
  }

  /**
   * Streaming resampler to 16 kHz: each output sample is the mean of the input samples it spans
   * (a box filter, enough against aliasing of speech from 48 kHz), carrying the remainder to the
   * next call. Below 16 kHz input it repeats samples.
   */
  function makeResampler(inRate) {
    var step = inRate / RATE; // input samples per output sample
    var pending = new Float32Array(0);
    var pos = 0; // fractional index in `pending` where the next output sample starts
    return function (input) {
      var all = new Float32Array(pending.length + input.length);
      all.set(pending, 0);
      all.set(input, pending.length);
      var count = Math.max(0, Math.floor((all.length - pos) / step));
      var out = new Float32Array(count);
      for (var k = 0; k < count; k++) {
        var from = Math.floor(pos);
        var to = Math.max(from + 1, Math.floor(pos + step));
        var sum = 0;
        for (var i = from; i < to; i++) sum += all[i];
        out[k] = sum / (to - from);
        pos += step;
      }
      var keep = Math.floor(pos);
      pending = all.slice(keep);
      pos -= keep;
      return out;
    };
  }

  /** Float samples → s16le bytes → base64 (btoa takes a binary string; built in slices to spare the stack). */
  function pcmBase64(samples) {
    var bytes = new Uint8Array(samples.length * 2);
    var view = new DataView(bytes.buffer);
    for (var i = 0; i < samples.length; i++) {
      var s = Math.max(-1, Math.min(1, samples[i]));
      view.setInt16(i * 2, s < 0 ? s * 32768 : s * 32767, true);
    }
    var bin = '';
    for (var at = 0; at < bytes.length; at += 0x8000) bin += String.fromCharCode.apply(null, bytes.subarray(at, at + 0x8000));
    return btoa(bin);
  }

  function describeMicError(e) {
    var name = e && e.name;
    if (name === 'NotAllowedError' || name === 'SecurityError') {
      return 'Microphone permission was denied. Allow the microphone for this site in the browser (the icon in the address bar) and press Start again.';
    }
    if (name === 'NotFoundError' || name === 'OverconstrainedError') return 'No microphone was found. Connect one and press Start again.';
    if (name === 'NotReadableError') return 'The microphone is in use by another program or could not be opened.';
    return 'The microphone could not be opened: ' + (e && e.message ? e.message : String(e));
  }

  /** The spec's error body `{detail: {status, message}}` in words, with the HTTP status. */
  async function httpError(res) {
    var text = '';
    try { text = await res.text(); } catch (e) { /* the status alone is said */ }
    var detail = null;
    try { detail = JSON.parse(text).detail; } catch (e) { /* not JSON */ }
    var said = detail && typeof detail === 'object' ? detail.message : typeof detail === 'string' ? detail : text.slice(0, 200);
    if (res.status === 401) return 'Your session has ended: reload the page and sign in again.';
    return 'The session token could not be made (HTTP ' + res.status + (said ? ': ' + said : '') + ').';
  }

  async function mintToken() {
    var res;
    try {
      res = await fetch(apiBase + '/single-use-token/realtime_scribe', {
        method: 'POST', credentials: 'same-origin', headers: { 'x-csrf-token': csrfToken }
      });
    } catch (e) {
      throw new Error('Network error: the service could not be reached.');
    }
    if (!res.ok) throw new Error(await httpError(res));
    var body = await res.json();
    if (!body || typeof body.token !== 'string') throw new Error('The service answered without a token.');
    return body.token;
  }

  function socketUrl(token) {
    var q = new URLSearchParams({
      model_id: 'scribe_v2_realtime', audio_format: 'pcm_16000', commit_strategy: 'vad',
      vad_silence_threshold_secs: '1', token: token
    });
    return (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + apiBase + '/speech-to-text/realtime?' + q.toString();
  }

  /** The realtime socket's error messages in words (the `error` field says the detail). */
  function describeRefusal(type, detail) {
    var d = detail ? ' (' + detail + ')' : '';
    switch (type) {
      case 'quota_exceeded': return 'Out of credits: live transcription costs one credit per started second of audio' + d + '. The developer page shows your balance.';
      case 'auth_error': return 'The service refused the session token' + d + '. Reload the page and try again.';
      case 'resource_exhausted': return 'The service is busy: every recognizer is in use. Try again in a moment.';
      case 'session_time_limit_exceeded': return 'The session reached its time limit' + d + '. Press Start to go on.';
      case 'queue_overflow': return 'The recognizer fell behind the audio' + d + '. Press Start to go on.';
      default: return 'Transcription stopped (' + type + ')' + d + '.';
    }
  }

  /** getUserMedia → (AudioWorklet | ScriptProcessor) → resample → 100 ms frames to `send`. */
  async function startCapture(stream, send) {
    var Ctx = window.AudioContext || window.webkitAudioContext;
    if (!Ctx) throw new Error('This browser has no Web Audio API.');
    var ctx = new Ctx();
    if (ctx.state === 'suspended') await ctx.resume();
    var resample = makeResampler(ctx.sampleRate);
    var buffered = new Float32Array(0);
    var take = function (frame) {
      var more = resample(frame);
      var all = new Float32Array(buffered.length + more.length);
      all.set(buffered, 0);
      all.set(more, buffered.length);
      var at = 0;
      for (; at + CHUNK_SAMPLES <= all.length; at += CHUNK_SAMPLES) send(pcmBase64(all.subarray(at, at + CHUNK_SAMPLES)));
      buffered = all.slice(at);
    };
    var source = ctx.createMediaStreamSource(stream);
    // A silent sink keeps the node pulled by the graph without playing the microphone back.
    var mute = ctx.createGain();
    mute.gain.value = 0;
    mute.connect(ctx.destination);
    var node;
    if (ctx.audioWorklet && window.AudioWorkletNode) {
      await ctx.audioWorklet.addModule('/static/mic-worklet.js');
      node = new AudioWorkletNode(ctx, 'mic-batcher', { numberOfInputs: 1, numberOfOutputs: 1, channelCount: 1 });
      node.port.onmessage = function (e) { take(e.data); };
    } else {
      node = ctx.createScriptProcessor(4096, 1, 1);
      node.onaudioprocess = function (e) { take(new Float32Array(e.inputBuffer.getChannelData(0))); };
    }
    source.connect(node);
    node.connect(mute);
    // Which capture path runs, for a tester's eye (and the browser test's).
    startButton.dataset.capture = node.port ? 'worklet' : 'script-processor';
    return {
      /** Stops the microphone; returns the last frame (under 100 ms), if any, for the final commit. */
      stop: function () {
        try { source.disconnect(); node.disconnect(); } catch (e) { /* already disconnected */ }
        if (node.port) node.port.onmessage = null;
        stream.getTracks().forEach(function (track) { track.stop(); });
        ctx.close().catch(function () { /* already closed */ });
        var rest = buffered;
        buffered = new Float32Array(0);
        return rest.length ? pcmBase64(rest) : '';
      }
    };
  }

  function showCommitted(text) {
    partialEl.textContent = '';
    if (!text || !text.trim()) return;
    var li = document.createElement('li');
    li.textContent = text.trim();
    linesEl.appendChild(li);
    linesEl.parentElement.scrollTop = linesEl.parentElement.scrollHeight;
  }

  /** Ends the session: microphone off, buttons back, socket closed; `text` is the final status. */
  function finish(s, text, isError) {
    if (session !== s) return;
    session = null;
    if (s.capture) s.capture.stop();
    else if (s.stream) s.stream.getTracks().forEach(function (track) { track.stop(); });
    clearTimeout(s.stopTimer);
    if (s.ws && s.ws.readyState <= 1) s.ws.close(1000);
    partialEl.textContent = '';
    startButton.disabled = false;
    startButton.removeAttribute('aria-busy');
    stopButton.disabled = true;
    setStatus(text, isError);
  }

  function onMessage(s, event) {
    var m;
    try { m = JSON.parse(event.data); } catch (e) { return; }
    var type = m && m.message_type;
    if (type === 'session_started') {
      s.started = true;
      startCapture(s.stream, function (b64) {
        if (s.ws.readyState === 1) s.ws.send(JSON.stringify({ message_type: 'input_audio_chunk', audio_base_64: b64, commit: false, sample_rate: RATE }));
      }).then(function (capture) {
        if (session !== s) { capture.stop(); return; }
        s.capture = capture;
        stopButton.disabled = false;
        startButton.removeAttribute('aria-busy');
        setStatus('Listening… speak now.', false);
      }, function (e) {
        finish(s, 'The microphone could not be started: ' + (e && e.message ? e.message : String(e)), true);
      });
    } else if (type === 'partial_transcript') {
      partialEl.textContent = m.text || '';
    } else if (type === 'committed_transcript') {
      showCommitted(m.text);
      if (s.stopping) finish(s, 'Stopped.', false);
    } else if (typeof m.error === 'string' || /error|exceeded|exhausted|overflow/.test(type || '')) {
      finish(s, describeRefusal(type, m.error), true);
    }
  }

  async function start() {
    if (session) return;
    var s = { ws: null, stream: null, capture: null, started: false, stopping: false, stopTimer: 0 };
    session = s;
    startButton.disabled = true;
    startButton.setAttribute('aria-busy', 'true');
    if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
      finish(s, 'This page cannot use the microphone: browsers allow it only over https (or on localhost).', true);
      return;
    }
    setStatus('Asking for the microphone…', false);
    try {
      s.stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true } });
    } catch (e) {
      finish(s, describeMicError(e), true);
      return;
    }
    if (session !== s) { s.stream.getTracks().forEach(function (track) { track.stop(); }); return; }
    setStatus('Connecting…', false);
    var token;
    try {
      token = await mintToken();
    } catch (e) {
      finish(s, e.message, true);
      return;
    }
    if (session !== s) return;
    s.ws = new WebSocket(socketUrl(token));
    s.ws.onmessage = function (e) { onMessage(s, e); };
    s.ws.onclose = function (e) {
      if (s.stopping) finish(s, 'Stopped.', false);
      else finish(s, 'The connection closed' + (e.code ? ' (' + e.code + (e.reason ? ': ' + e.reason : '') + ')' : '') + '. Press Start to go on.', true);
    };
  }

  /** Microphone off, the last partial committed (the service answers with its committed_transcript), then close. */
  function stop() {
    var s = session;
    if (!s || s.stopping) return;
    s.stopping = true;
    stopButton.disabled = true;
    var rest = s.capture ? s.capture.stop() : '';
    s.capture = null;
    if (s.ws && s.ws.readyState === 1 && s.started) {
      s.ws.send(JSON.stringify({ message_type: 'input_audio_chunk', audio_base_64: rest, commit: true, sample_rate: RATE }));
      setStatus('Finishing the last line…', false);
      s.stopTimer = setTimeout(function () { finish(s, 'Stopped.', false); }, STOP_WAIT_MS);
    } else {
      finish(s, 'Stopped.', false);
    }
  }

  if (!startButton) return;
  startButton.addEventListener('click', start);
  stopButton.addEventListener('click', stop);
  window.addEventListener('pagehide', function () { if (session) finish(session, 'Stopped.', false); });
})();
