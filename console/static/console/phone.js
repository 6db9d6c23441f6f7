// The browser phone (issue 43; docs/console.md, "Browser phone"). On every console page: the
// "Phone" switch in the header, and the phone's panel. With the phone on, calls to numbers that
// forward to "browser" ring this tab: Answer asks for the microphone, offers WebRTC audio to
// Relay's telephony agent (rtc_offer) and plays what the caller says; Decline leaves the ring.
// On the calls page, "Call from the browser" places a call the same way. The frames are
// docs/websocket.md's. Nothing here is needed for the rest of the console to work.
(function () {
  "use strict";
  var script = document.currentScript;
  var panel = document.getElementById("phone");
  var toggle = document.getElementById("phone-switch");
  if (!panel || !toggle) return;
  var config = JSON.parse(document.getElementById("phone-config").textContent);
  var csrf = document.querySelector("input[name=csrfmiddlewaretoken]");
  var el = {
    help: panel.querySelector(".phone-help"),
    line: panel.querySelector(".phone-line"),
    alert: panel.querySelector(".phone-alert"),
    ringing: panel.querySelector(".phone-ringing"),
    caller: panel.querySelector(".phone-caller"),
    answer: panel.querySelector(".phone-answer"),
    decline: panel.querySelector(".phone-decline"),
    talking: panel.querySelector(".phone-talking"),
    mute: panel.querySelector(".phone-mute"),
    hold: panel.querySelector(".phone-hold"),
    hangup: panel.querySelector(".phone-hangup"),
    transfer: panel.querySelector(".phone-transfer"),
    consult: panel.querySelector(".phone-consult"),
    consultHelp: panel.querySelector("#phone-consult-help"),
    consulting: panel.querySelector(".phone-consulting"),
    complete: panel.querySelector(".phone-complete"),
    cancel: panel.querySelector(".phone-cancel"),
    keypad: panel.querySelector(".phone-keypad"),
    audio: new Audio(), // the caller's voice; not in the page: a player there is a message's
  };
  el.audio.autoplay = true;
  var dial = document.getElementById("browser-call");
  var socket = null;
  var delay = 1000;
  var stopped = false;
  var on = localStorage.getItem("relay.phone") === "on";
  var rings = {}; // ring -> the incoming_call frame of a ring this tab shows
  // {callId (a call placed from here) or ring and call (a ring taken: the ring's name and
  // Relay's id of the inbound call), pc, stream, outbound, label}
  var call = null;
  var tone = null;
  var audioContext = null;
  var DENIED = "Your browser did not allow the microphone, so the call cannot be taken here. " +
    "Allow the microphone for this site in your browser's settings, then try again.";
  var NO_MICROPHONE = "No microphone was found, so the call cannot be taken here.";

  function say(text) { el.line.textContent = text; }
  function warn(text) { el.alert.textContent = text; }

  // A frame about the call: a ring is named by `ring`, a call placed by its callId.
  function about(type, details) {
    var frame = { type: type };
    if (details.ring) frame.ring = details.ring; else frame.callId = details.callId;
    return frame;
  }

  // Whether Relay's frame is about the call.
  function concerns(frame, details) {
    return details.ring ? frame.ring === details.ring : frame.callId === details.callId;
  }

  function send(frame) {
    if (socket && socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify(frame));
      return true;
    }
    return false;
  }

  // --- The switch ---------------------------------------------------------------------------
  function showSwitch() {
    toggle.hidden = false;
    toggle.setAttribute("aria-checked", on ? "true" : "false");
    toggle.querySelector(".phone-state").textContent = on ? "on" : "off";
    panel.hidden = !on && !call;
    el.help.hidden = !on;
  }

  toggle.addEventListener("click", function () {
    on = !on;
    localStorage.setItem("relay.phone", on ? "on" : "off");
    if (on) unlockAudio();
    send({ type: "phone", on: on });
    if (!on) Object.keys(rings).forEach(stopRinging);
    showSwitch();
    say(on ? "Your phone is on: calls to your numbers that ring the browser ring here." :
      "Your phone is off.");
  });

  // A ring tone needs an AudioContext, which a browser lets a page start only from a click.
  function unlockAudio() {
    if (!audioContext && window.AudioContext) audioContext = new AudioContext();
    if (audioContext && audioContext.state === "suspended") audioContext.resume();
  }

  function startTone() {
    if (tone || !audioContext) return;
    var gain = audioContext.createGain();
    gain.gain.value = 0;
    gain.connect(audioContext.destination);
    [440, 480].forEach(function (hz) {
      var oscillator = audioContext.createOscillator();
      oscillator.frequency.value = hz;
      oscillator.connect(gain);
      oscillator.start();
    });
    // The UK ring cadence: 0.4 s on, 0.2 off, 0.4 on, 2 off.
    var cadence = [[0, 0.15], [0.4, 0], [0.6, 0.15], [1.0, 0]];
    function ringOnce() {
      var now = audioContext.currentTime;
      cadence.forEach(function (step) { gain.gain.setValueAtTime(step[1], now + step[0]); });
    }
    ringOnce();
    tone = { gain: gain, timer: setInterval(ringOnce, 3000) };
  }

  function stopTone() {
    if (!tone) return;
    clearInterval(tone.timer);
    tone.gain.disconnect();
    tone = null;
  }

  // --- Incoming calls -----------------------------------------------------------------------
  function ringing(frame) {
    if (!on || call) return;
    rings[frame.ring] = frame;
    el.caller.textContent = "Call from " + frame.caller_num + " to " +
      (frame.alias ? frame.alias + " (" + frame.number + ")" : frame.number);
    el.ringing.dataset.ring = frame.ring;
    el.ringing.hidden = false;
    panel.hidden = false;
    warn("");
    say("Ringing: " + el.caller.textContent + ".");
    startTone();
  }

  function stopRinging(name) {
    delete rings[name];
    if (el.ringing.dataset.ring === name) {
      el.ringing.hidden = true;
      delete el.ringing.dataset.ring;
      stopTone();
    }
  }

  el.answer.addEventListener("click", function () {
    var name = el.ringing.dataset.ring;
    var ring = rings[name];
    if (!ring) return;
    stopRinging(name); // the ring is this tab's call now
    var details = { ring: name, call: ring.call, outbound: false, label: ring.caller_num };
    start(details, function (sdp) {
      var frame = about("rtc_offer", details);
      frame.sdp = sdp;
      return frame;
    });
  });

  el.decline.addEventListener("click", function () {
    var name = el.ringing.dataset.ring;
    if (!name) return;
    send({ type: "rtc_hangup", ring: name });
    stopRinging(name);
    say("Declined.");
  });

  // --- A call, either way -------------------------------------------------------------------
  function start(details, offerFrame) {
    call = details;
    say("Asking your browser for the microphone…");
    navigator.mediaDevices.getUserMedia({ audio: true, video: false })
      .then(function (stream) {
        if (call !== details) { stop(stream); return null; }
        details.stream = stream;
        var pc = new RTCPeerConnection({ iceServers: config.iceServers });
        details.pc = pc;
        stream.getTracks().forEach(function (track) { pc.addTrack(track, stream); });
        pc.addEventListener("track", function (event) {
          el.audio.srcObject = event.streams[0] || new MediaStream([event.track]);
        });
        pc.addEventListener("icecandidate", function (event) {
          if (event.candidate && details.offered) {
            var frame = about("rtc_candidate", details);
            frame.candidate = event.candidate.candidate;
            frame.sdpMid = event.candidate.sdpMid;
            send(frame);
          }
        });
        pc.addEventListener("connectionstatechange", function () {
          if (pc.connectionState === "connected") talking(details);
          if (pc.connectionState === "failed" || pc.connectionState === "disconnected") {
            ended(details, "The call ended: the connection to the call was lost.");
          }
        });
        return pc.createOffer().then(function (offer) {
          return pc.setLocalDescription(offer);
        }).then(function () {
          return gathered(pc);
        }).then(function () {
          if (call !== details) return;
          details.offered = true;
          say("Connecting…");
          send(offerFrame(pc.localDescription.sdp));
        });
      })
      .catch(function (error) {
        if (call !== details) return;
        var denied = error && (error.name === "NotAllowedError" || error.name === "SecurityError");
        var reason = denied ? DENIED : (error && error.name === "NotFoundError" ? NO_MICROPHONE :
          "The call could not be started: " + (error && error.message ? error.message : error));
        if (!details.outbound) send(about("rtc_hangup", details));
        ended(details, "");
        warn(reason);
      });
  }

  // Every candidate in the offer (no trickle needed on a LAN), or what there is after 2 s.
  function gathered(pc) {
    if (pc.iceGatheringState === "complete") return Promise.resolve();
    return new Promise(function (resolve) {
      var timer = setTimeout(resolve, 2000);
      pc.addEventListener("icegatheringstatechange", function () {
        if (pc.iceGatheringState === "complete") { clearTimeout(timer); resolve(); }
      });
    });
  }

  function talking(details) {
    if (call !== details || details.talking) return;
    details.talking = true;
    el.talking.hidden = false;
    panel.hidden = false;
    el.mute.setAttribute("aria-pressed", "false");
    showHeld(false);
    // A ring taken (an inbound call) or a call placed from here may be handed on; only a
    // ring taken may be consulted on first.
    el.transfer.hidden = !(details.call || details.outbound);
    el.consult.hidden = !details.call;
    el.consultHelp.hidden = !details.call;
    el.transfer.querySelector("[name=to]").value = "";
    showConsulting(null);
    say("On a call with " + details.label + ".");
    el.hangup.focus();
  }

  function stop(stream) {
    if (stream) stream.getTracks().forEach(function (track) { track.stop(); });
  }

  function ended(details, text) {
    if (call !== details) return;
    call = null;
    if (details.pc) details.pc.close();
    stop(details.stream);
    el.audio.srcObject = null;
    el.talking.hidden = true;
    el.consulting.hidden = true;
    showSwitch();
    if (text) say(text);
    if (dial) dial.querySelector("button[type=submit]").disabled = false;
  }

  el.hangup.addEventListener("click", function () {
    if (!call) return;
    // A callee being handed on (Transfer pressed on a call placed from here) is left to the
    // transfer: only this tab's side ends (its connection closes), not the call.
    if (!(call.outbound && call.transferring)) send(about("rtc_hangup", call));
    ended(call, "You hung up.");
  });

  // Mute is a toggle whose name stays "Mute" (pressed while muted), as Hold's stays "Hold"
  // (docs/decisions.md, issue 58). It is the tab's alone: its microphone's track is turned
  // off here, nothing is sent to Relay, and the call goes on as it was (no music).
  el.mute.addEventListener("click", function () {
    if (!call || !call.stream) return;
    var muted = el.mute.getAttribute("aria-pressed") !== "true";
    call.stream.getAudioTracks().forEach(function (track) { track.enabled = !muted; });
    el.mute.setAttribute("aria-pressed", muted ? "true" : "false");
    say(muted ?
      "Muted: " + call.label + " hears nothing from you. Press Mute again to unmute." :
      "On a call with " + call.label + ".");
  });

  // Hold is a toggle whose name stays "Hold" (pressed while held); the line says the rest.
  function showHeld(held) {
    el.hold.setAttribute("aria-pressed", held ? "true" : "false");
  }

  // Hold and Resume go to the agent (rtc_hold); the button follows its answer, not the click.
  el.hold.addEventListener("click", function () {
    if (!call || !call.talking) return;
    var frame = about("rtc_hold", call);
    frame.hold = el.hold.getAttribute("aria-pressed") !== "true";
    if (!send(frame)) warn("Relay cannot be reached just now: try again in a moment.");
  });

  // Transfer (issue 58): a ring this tab took, or the callee of a call placed from here, is
  // handed on (call_transfer, the API's POST /api/calls/:call/transfer as a frame); the agent
  // ends this tab's side once the target answers. If it does not, voicemail takes an
  // incoming caller, and a callee comes back to this tab (call_transfer "returned").
  el.transfer.addEventListener("submit", function (event) {
    event.preventDefault();
    if (!call || !(call.call || call.outbound) || !call.talking || call.transferring) return;
    var to = el.transfer.querySelector("[name=to]").value.trim();
    warn("");
    call.transferring = to;
    var frame = call.outbound ?
      { type: "call_transfer", callId: call.callId, to: to } :
      { type: "call_transfer", call: call.call, ring: call.ring, to: to };
    if (!send(frame)) {
      call.transferring = null;
      warn("Relay cannot be reached just now: try again in a moment.");
    }
  });

  // Consult (issue 58, an attended transfer): the caller holds (music) while the agent calls
  // the number in the Transfer field and this tab talks with it once it answers; Complete puts
  // the caller through to it (this tab's side ends), Cancel comes back to the caller. The
  // frames are call_consult, call_consult_complete and call_consult_cancel.
  function showConsulting(to) {
    var consulting = !!to;
    el.consulting.hidden = !consulting;
    el.transfer.hidden = consulting || !(call && (call.call || call.outbound));
    el.complete.disabled = true;
    if (call) {
      call.consulting = to;
      call.consultAnswered = false;
    }
  }

  function consultFrame(type) {
    return { type: type, call: call.call, ring: call.ring };
  }

  el.consult.addEventListener("click", function () {
    if (!call || !call.call || !call.talking || call.transferring || call.consulting) return;
    var field = el.transfer.querySelector("[name=to]");
    var to = field.value.trim();
    if (!to) { field.reportValidity(); return; }
    warn("");
    var frame = consultFrame("call_consult");
    frame.to = to;
    call.asked = "call_consult";
    if (!send(frame)) {
      call.asked = null;
      warn("Relay cannot be reached just now: try again in a moment.");
    }
  });

  [[el.complete, "call_consult_complete"], [el.cancel, "call_consult_cancel"]].forEach(
    function (pair) {
      pair[0].addEventListener("click", function () {
        if (!call || !call.consulting) return;
        warn("");
        call.asked = pair[1];
        if (!send(consultFrame(pair[1]))) {
          call.asked = null;
          warn("Relay cannot be reached just now: try again in a moment.");
        }
      });
    });

  var RETURNED = {
    canceled: "You cancelled the consultation",
    no_answer: "did not answer",
    busy: "was busy",
    failed: "could not be reached",
    hung_up: "hung up",
  };

  function consulted(frame) {
    if (frame.status === "consulting") {
      call.asked = null;
      showConsulting(frame.to);
      say("Calling " + frame.to + " for you; " + call.label + " is on hold, hearing music.");
      el.cancel.focus();
    } else if (frame.status === "answered" && call.consulting) {
      call.consultAnswered = true;
      el.complete.disabled = false;
      say("On a call with " + frame.to + "; " + call.label + " is on hold. " +
        "Complete puts them through, Cancel brings you back.");
      el.complete.focus();
    } else if (frame.status === "completing" || frame.status === "canceling") {
      call.asked = null;
    } else if (frame.status === "completed") {
      call.transferring = frame.to;
    } else if (frame.status === "returned") {
      var to = call.consulting || frame.to;
      showConsulting(null);
      var why = RETURNED[frame.reason] || "could not be reached";
      say((frame.reason === "canceled" ? why : to + " " + why) +
        ": back on the call with " + call.label + ".");
      el.hangup.focus();
    }
  }

  el.keypad.addEventListener("click", function (event) {
    var key = event.target.closest("button[data-key]");
    if (!key || !call) return;
    var frame = about("rtc_dtmf", call);
    frame.digits = key.dataset.key;
    send(frame);
  });

  // --- Calls from the browser (the calls page) ----------------------------------------------
  if (dial) {
    var to = dial.querySelector("[name=to]");
    dial.querySelector(".dial-keypad").addEventListener("click", function (event) {
      var key = event.target.closest("button[data-key]");
      if (key) to.value += key.dataset.key;
    });
    dial.addEventListener("submit", function (event) {
      event.preventDefault();
      if (call) return;
      warn("");
      unlockAudio();
      var callId = "browser-" + (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()));
      var from = dial.querySelector("[name=from]").value;
      var number = to.value.trim();
      dial.querySelector("button[type=submit]").disabled = true;
      panel.hidden = false;
      document.dispatchEvent(new CustomEvent("relay:browser-call",
        { detail: { callId: callId, to: number } }));
      start({ callId: callId, outbound: true, label: number }, function (sdp) {
        var frame = { type: "rtc_offer", callId: callId, to: number, sdp: sdp };
        if (from) frame.from = from;
        return frame;
      });
    });
  }

  // --- The socket ---------------------------------------------------------------------------
  function received(frame) {
    if (frame.type === "phone") {
      panel.dataset.phone = frame.on ? "on" : "off"; // the server rings this tab, or not
      return;
    }
    if (frame.type === "incoming_call" && frame.ringBrowser) return ringing(frame);
    if (frame.type === "rtc_answer" && call && concerns(frame, call) && call.pc) {
      call.pc.setRemoteDescription({ type: "answer", sdp: frame.sdp });
      return;
    }
    if (frame.type === "rtc_hold" && call && concerns(frame, call) && call.talking) {
      showHeld(frame.hold);
      say(frame.hold ?
        "On hold: " + call.label + " hears music. Press Hold again to resume." :
        "On a call with " + call.label + ".");
      return;
    }
    if (frame.type === "call_consult" || frame.type === "call_consult_complete" ||
        frame.type === "call_consult_cancel") {
      if (call && call.ring && frame.ring === call.ring) consulted(frame);
      return;
    }
    if (frame.type === "call_transfer" && call &&
        (call.outbound ? frame.callId === call.callId : frame.call === call.call)) {
      if (frame.status === "returned") { // the target did not take the callee: back here
        call.transferring = null;
        say(frame.to + " " + (RETURNED[frame.reason] || "could not be reached") +
          ": back on the call with " + call.label + ".");
        el.hangup.focus();
        return;
      }
      say("Transferring " + call.label + " to " + frame.to + "…");
      return;
    }
    if (frame.type === "rtc_hangup") {
      if (call && concerns(frame, call) && call.transferring) {
        return ended(call, "The call was transferred to " + call.transferring + ".");
      }
      if (call && concerns(frame, call)) {
        return ended(call, frame.reason === "answered_elsewhere" ?
          "The call was taken elsewhere." : "The call ended.");
      }
      var ring = frame.ring && rings[frame.ring];
      if (ring) {
        stopRinging(frame.ring);
        say({
          answered_elsewhere: "The call was answered elsewhere.",
          caller_hung_up: "Missed call from " + ring.caller_num + ": the caller hung up.",
          no_answer: "Missed call from " + ring.caller_num + ".",
          removed: "The call stopped ringing here: you are no longer a member of its number.",
        }[frame.reason] || "The call ended.");
      }
      return;
    }
    if (frame.type === "call_status" && call && call.outbound && frame.callId === call.callId) {
      if (["completed", "busy", "no_answer", "failed", "canceled"].indexOf(frame.status) !== -1) {
        ended(call, "The call ended (" + frame.status.replace("_", " ") + ").");
      }
      return;
    }
    if (frame.type === "error" && call && concerns(frame, call) && call.asked) {
      call.asked = null; // a consultation's step refused: the call goes on as it was
      warn(frame.error);
      return;
    }
    if (frame.type === "error" && call && concerns(frame, call) && call.transferring) {
      call.transferring = null; // the transfer was refused: the call goes on here
      warn(frame.error);
      return;
    }
    if (frame.type === "error" && call && concerns(frame, call)) {
      ended(call, "");
      warn(frame.error);
    }
  }

  function retry() {
    socket = null;
    if (stopped) return;
    setTimeout(connect, delay);
    delay = Math.min(delay * 2, 30000);
  }

  function connect() {
    fetch(script.dataset.tokenUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrf ? csrf.value : "" },
    })
      .then(function (response) {
        if (response.status === 401 || response.status === 403) {
          stopped = true;
          return null;
        }
        return response.ok ? response.json() : null;
      })
      .then(function (body) {
        if (!body) return retry();
        socket = new WebSocket(body.wsUrl);
        body = null;
        socket.addEventListener("open", function () {
          delay = 1000;
          send({ type: "phone", on: on });
        });
        socket.addEventListener("message", function (event) {
          var frame;
          try { frame = JSON.parse(event.data); } catch (e) { return; }
          received(frame);
        });
        socket.addEventListener("close", function () {
          delete panel.dataset.phone;
          if (call) ended(call, "The call ended: the connection to Relay was lost.");
          retry();
        });
      })
      .catch(retry);
  }

  showSwitch();
  connect();
})();
