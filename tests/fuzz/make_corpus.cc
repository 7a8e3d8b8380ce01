// Writes the frame fuzzer's seed corpus (tests/fuzz/corpus/): valid frames of every message
// type built with the real builders, and the malformed shapes the decoder must refuse.
// Each seed is an inbound byte stream (one or more frames), under 4 KiB.
// Usage: make_frame_corpus DIR     (overwrites DIR/NAME for each seed; deletes nothing)
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "tests/fuzz/decode_input.h"
#include "worker_proto/messages.h"

using namespace corral::proto;
using Bytes = std::vector<std::uint8_t>;

namespace {

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Bytes header(std::uint32_t n) {
  return {static_cast<std::uint8_t>(n), static_cast<std::uint8_t>(n >> 8), static_cast<std::uint8_t>(n >> 16),
          static_cast<std::uint8_t>(n >> 24)};
}

Bytes exec_result(std::uint64_t id, bool setup_error) {
  flatbuffers::FlatBufferBuilder fbb(256);
  auto enforced = fbb.CreateVectorOfStrings({"userns", "mountns", "landlock"});
  auto temp_dir = fbb.CreateString("/tmp/corral-1000/scope-1");
  auto step = setup_error ? fbb.CreateString("exec") : 0;
  auto message = setup_error ? fbb.CreateString("execve /nonexistent: No such file or directory") : 0;
  ExecResultBuilder b(fbb);
  b.add_status(setup_error ? ExitStatus::setup_error : ExitStatus::exited);
  if (!setup_error) b.add_exit_code(3);
  b.add_wall_ms(12);
  b.add_user_cpu_ms(1);
  b.add_sys_cpu_ms(2);
  b.add_max_rss_kb(3400);
  if (!setup_error) b.add_memory_peak_kb(4096);
  b.add_enforced(enforced);
  b.add_temp_dir(temp_dir);
  b.add_setup_step(step);
  b.add_setup_errno(setup_error ? 2 : 0);
  b.add_message(message);
  b.add_stdout_bytes(64);
  b.add_stderr_bytes(8);
  auto body = b.Finish();
  return finish_frame(fbb, CreateMessage(fbb, id, Body::ExecResult, body.Union()));
}

// A [ubyte] field holding `text`.
flatbuffers::Offset<flatbuffers::Vector<std::uint8_t>> byte_vector(flatbuffers::FlatBufferBuilder& fbb,
                                                                   const std::string& text) {
  return fbb.CreateVector(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
}

// One frame with `body` (built by `make` into the builder) as request `id`'s message.
template <typename Make>
Bytes frame_of(std::uint64_t id, Body type, Make make) {
  flatbuffers::FlatBufferBuilder fbb(256);
  const auto body = make(fbb);
  return finish_frame(fbb, CreateMessage(fbb, id, type, body.Union()));
}

ExecArgs full_exec_args() {
  ExecArgs a;
  a.argv = {"/bin/echo", "hello", "world"};
  a.env = {{"LANG", "C.UTF-8"}, {"EMPTY", ""}};
  a.cwd = "/tmp";
  a.stdin_data = "line one\nline two\n";
  a.timeout_ms = 5000;
  a.grace_ms = 250;
  a.max_output_bytes = 65536;
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_frame_corpus DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<std::pair<std::string, Bytes>> seeds;
  auto add = [&](std::string name, Bytes bytes) { seeds.emplace_back(std::move(name), std::move(bytes)); };

  // Valid frames, one per message type (and the variants that change the layout).
  const Bytes hello = make_hello("fuzz-seed");
  add("hello", hello);
  add("hello_reply", make_hello_reply("0.1.0",
                                      {{"userns", true, "unprivileged user namespaces"},
                                       {"landlock", false, "kernel 6.1 without CONFIG_SECURITY_LANDLOCK"}},
                                      kDefaultMaxFrame));
  std::vector<LayerInfo> many;
  for (int i = 0; i < 40; ++i) many.push_back({"layer" + std::to_string(i), i % 2 == 0, "probe " + std::to_string(i)});
  add("hello_reply_40_layers", make_hello_reply("0.1.0", many, kDefaultMaxFrame));
  const Bytes exec = make_exec(7, full_exec_args());
  add("exec_argv", exec);
  ExecArgs shell;
  shell.shell = "echo out; echo err >&2; exit 3";
  add("exec_shell", make_exec(8, shell));
  ExecArgs big_stdin;
  big_stdin.argv = {"/bin/cat"};
  big_stdin.stdin_data = std::string(3000, 'x');
  add("exec_stdin_3k", make_exec(9, big_stdin));
  ExecArgs non_utf8;
  non_utf8.argv = {"/bin/printf", "\xff\xfe\x80"};
  add("exec_non_utf8_arg", make_exec(10, non_utf8));
  ExecArgs isolated = full_exec_args();
  isolated.mode = Mode::read_only;
  isolated.network = Network::allowed;
  isolated.workspaces = {"/home/u/project"};
  isolated.deny_read = {"/home/u/.ssh"};
  isolated.protect = {"/home/u/project/.git"};
  isolated.binds = {{"/opt/tool", "/tool", false}, {"/home/u/cache", "/cache", true}};
  isolated.memory_bytes = 256u << 20;
  isolated.pids = 64;
  isolated.cpu_time_ms = 10000;
  isolated.cpus = 0.5;
  isolated.max_file_size = 1u << 20;
  add("exec_isolation", make_exec(15, isolated));
  FileArgs file;
  file.path = "src/main.cc";
  file.workspaces = {"/home/u/project"};
  file.offset = 10;
  file.max_bytes = 4096;
  add("read_request", make_read(16, file));
  file.data = "int main() {}\n";
  file.binary = true;
  add("write_request", make_write(17, file));
  file.path = "src";
  file.max_entries = 100;
  add("list_request", make_list(18, file));
  {
    flatbuffers::FlatBufferBuilder fbb(128);
    const std::string text = "#include <cstdio>\n";
    auto data = fbb.CreateVector(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
    auto body = CreateReadResult(fbb, data, 0, 4000, true);
    add("read_result", finish_frame(fbb, CreateMessage(fbb, 16, Body::ReadResult, body.Union())));
  }
  {
    flatbuffers::FlatBufferBuilder fbb(64);
    auto body = CreateWriteResult(fbb, 14);
    add("write_result", finish_frame(fbb, CreateMessage(fbb, 17, Body::WriteResult, body.Union())));
  }
  {
    flatbuffers::FlatBufferBuilder fbb(256);
    std::vector<flatbuffers::Offset<DirEntry>> entries = {
        CreateDirEntry(fbb, fbb.CreateString("main.cc"), fbb.CreateString("file"), 14, 1700000000000),
        CreateDirEntry(fbb, fbb.CreateString("lib"), fbb.CreateString("dir"), 0, -1)};
    auto body = CreateListResult(fbb, fbb.CreateVector(entries), false);
    add("list_result", finish_frame(fbb, CreateMessage(fbb, 18, Body::ListResult, body.Union())));
  }
  // Scopes and background commands.
  ScopeArgs scope;
  scope.parent = "s-1";
  scope.detach = true;
  scope.mode = Mode::read_only;
  scope.workspaces = {"/home/u/project"};
  add("scope_create", make_scope_create(19, scope));
  add("scope_close", make_scope_close(20, "s-2"));
  add("scope_list_request", make_scope_list(21));
  add("poll", make_poll(22, "b-1"));
  add("background_stop", make_background_stop(23, "b-1", true));
  ExecArgs background;
  background.argv = {"/bin/sleep", "10"};
  background.scope = "s-1";
  background.background = true;
  add("exec_background", make_exec(24, background));
  {
    flatbuffers::FlatBufferBuilder fbb(128);
    auto body = CreateScopeCreated(fbb, fbb.CreateString("s-2"), fbb.CreateString("/tmp/corral-scope-abc"));
    add("scope_created", finish_frame(fbb, CreateMessage(fbb, 19, Body::ScopeCreated, body.Union())));
  }
  {
    flatbuffers::FlatBufferBuilder fbb(256);
    auto ws = fbb.CreateVectorOfStrings({"/home/u/project"});
    std::vector<flatbuffers::Offset<ScopeInfo>> infos = {
        CreateScopeInfo(fbb, fbb.CreateString("s-1"), 0, 1000, true, Mode::workspace_write, Network::denied, ws,
                        fbb.CreateString("/tmp/corral-scope-1"), 1, 0),
        CreateScopeInfo(fbb, fbb.CreateString("s-2"), fbb.CreateString("s-1"), 1000, false, Mode::read_only,
                        Network::allowed, 0, fbb.CreateString("/tmp/corral-scope-2"), 0, 2)};
    auto body = CreateScopeList(fbb, fbb.CreateVector(infos));
    add("scope_list", finish_frame(fbb, CreateMessage(fbb, 21, Body::ScopeList, body.Union())));
  }
  {
    flatbuffers::FlatBufferBuilder fbb(64);
    auto body = CreateAck(fbb);
    add("ack", finish_frame(fbb, CreateMessage(fbb, 20, Body::Ack, body.Union())));
  }
  {
    flatbuffers::FlatBufferBuilder fbb(64);
    auto body = CreateBackgroundStarted(fbb, fbb.CreateString("b-1"), fbb.CreateString("s-1"));
    add("background_started", finish_frame(fbb, CreateMessage(fbb, 24, Body::BackgroundStarted, body.Union())));
  }
  {
    // A poll of a command that has ended: its output so far and its ExecResult.
    flatbuffers::FlatBufferBuilder fbb(256);
    const std::string out = "done\n", err = "warn\n";
    auto id = fbb.CreateString("b-1");
    auto state = fbb.CreateString("exited");
    auto o = fbb.CreateVector(reinterpret_cast<const std::uint8_t*>(out.data()), out.size());
    auto e = fbb.CreateVector(reinterpret_cast<const std::uint8_t*>(err.data()), err.size());
    auto enforced = fbb.CreateVectorOfStrings({"user-ns", "seccomp"});
    ExecResultBuilder rb(fbb);
    rb.add_status(ExitStatus::exited);
    rb.add_exit_code(0);
    rb.add_wall_ms(10000);
    rb.add_enforced(enforced);
    auto result = rb.Finish();
    auto body = CreatePollReply(fbb, id, state, o, e, result);
    add("poll_reply", finish_frame(fbb, CreateMessage(fbb, 22, Body::PollReply, body.Union())));
  }
  // Workers: client <-> supervisor (request ids 25..29), and supervisor <-> worker on the
  // worker's socketpair (request id 1: the evaluation's number).
  add("worker_start", frame_of(25, Body::WorkerStart, [](flatbuffers::FlatBufferBuilder& fbb) {
        auto name = fbb.CreateString("py");
        auto scope = fbb.CreateString("s-1");
        auto argv = fbb.CreateVectorOfStrings({"/usr/bin/python3", "-u", "/opt/worker.py"});
        std::vector<flatbuffers::Offset<EnvVar>> vars = {
            CreateEnvVar(fbb, fbb.CreateString("LANG"), fbb.CreateString("C.UTF-8")),
            CreateEnvVar(fbb, fbb.CreateString("EMPTY"), fbb.CreateString(""))};
        auto env = fbb.CreateVector(vars);
        auto ws = fbb.CreateVectorOfStrings({"/home/u/project"});
        return CreateWorkerStart(fbb, name, scope, argv, env, Mode::read_only, Network::allowed, ws, 256u << 20, 64,
                                 0.5, 60000, true);
      }));
  add("worker_started", frame_of(25, Body::WorkerStarted, [](flatbuffers::FlatBufferBuilder& fbb) {
        return CreateWorkerStarted(fbb, fbb.CreateString("py"), fbb.CreateString("s-1"));
      }));
  add("worker_eval", frame_of(26, Body::WorkerEval, [](flatbuffers::FlatBufferBuilder& fbb) {
        auto name = fbb.CreateString("py");
        auto scope = fbb.CreateString("s-1");
        auto request = byte_vector(fbb, "{\"code\": \"1 + host('x')\"}");
        return CreateWorkerEval(fbb, name, scope, request, 5000, true, true);
      }));
  add("host_call", frame_of(26, Body::HostCall, [](flatbuffers::FlatBufferBuilder& fbb) {
        return CreateHostCall(fbb, 1, byte_vector(fbb, "{\"op\": \"x\"}"));
      }));
  add("host_reply", frame_of(26, Body::HostReply, [](flatbuffers::FlatBufferBuilder& fbb) {
        auto data = byte_vector(fbb, "41");
        return CreateHostReply(fbb, 1, data, fbb.CreateString("host: x failed"));
      }));
  add("worker_eval_result", frame_of(26, Body::WorkerEvalResult, [](flatbuffers::FlatBufferBuilder& fbb) {
        return CreateWorkerEvalResult(fbb, byte_vector(fbb, "{\"value\": 42}"), 1);
      }));
  add("evaluate", frame_of(1, Body::Evaluate, [](flatbuffers::FlatBufferBuilder& fbb) {
        return CreateEvaluate(fbb, byte_vector(fbb, "{\"code\": \"1 + host('x')\"}"));
      }));
  add("eval_reply", frame_of(1, Body::EvalReply, [](flatbuffers::FlatBufferBuilder& fbb) {
        return CreateEvalReply(fbb, byte_vector(fbb, "{\"value\": 42}"));
      }));
  add("worker_stop", frame_of(27, Body::WorkerStop, [](flatbuffers::FlatBufferBuilder& fbb) {
        return CreateWorkerStop(fbb, fbb.CreateString("py"), fbb.CreateString("s-1"), true);
      }));
  add("worker_list_request", frame_of(28, Body::WorkerListRequest, [](flatbuffers::FlatBufferBuilder& fbb) {
        return CreateWorkerListRequest(fbb, fbb.CreateString("s-1"));
      }));
  add("worker_list", frame_of(28, Body::WorkerList, [](flatbuffers::FlatBufferBuilder& fbb) {
        std::vector<flatbuffers::Offset<WorkerInfo>> infos = {
            CreateWorkerInfo(fbb, fbb.CreateString("py"), fbb.CreateString("s-1"), fbb.CreateString("idle"), 3,
                             fbb.CreateVectorOfStrings({"/usr/bin/python3", "-u"}), 4321),
            CreateWorkerInfo(fbb, fbb.CreateString("echo"), fbb.CreateString("s-2"), fbb.CreateString("state_lost"),
                             0, 0, 0)};
        return CreateWorkerList(fbb, fbb.CreateVector(infos));
      }));
  add("worker_logs_request", frame_of(29, Body::WorkerLogsRequest, [](flatbuffers::FlatBufferBuilder& fbb) {
        return CreateWorkerLogsRequest(fbb, fbb.CreateString("py"), fbb.CreateString("s-1"));
      }));
  add("worker_logs", frame_of(29, Body::WorkerLogs, [](flatbuffers::FlatBufferBuilder& fbb) {
        return CreateWorkerLogs(fbb, byte_vector(fbb, "worker ready\nTraceback: none\n"));
      }));
  add("output_stdout_64", make_output(7, Stream::out, std::string(63, 'o') + "\n"));
  add("output_stderr", make_output(7, Stream::err, "warning: something\n"));
  add("exec_result", exec_result(7, false));
  add("exec_result_setup_error", exec_result(11, true));
  const Bytes cancel = make_cancel(7, false);
  add("cancel", cancel);
  add("cancel_force", make_cancel(7, true));
  const Bytes status = make_status_request(12);
  add("status_request", status);
  StatusInfo info;
  info.server_version = "0.1.0";
  info.layers = {{"seccomp", true, ""}, {"cgroup", false, "no delegated cgroup v2 subtree"}};
  info.pid = 4242;
  info.uptime_ms = 123456;
  info.connections = 2;
  info.running_commands = 1;
  info.socket_path = "/run/user/1000/corral/corral.sock";
  add("status_reply", make_status_reply(12, info));
  add("error", make_error(7, ErrorCode::duplicate_request_id, "request id 7 is already in flight"));

  // Several frames in one input: a client session.
  add("session_hello_exec_cancel_status", cat({hello, exec, cancel, status}));

  // Truncation: nothing complete, nothing decoded.
  add("truncated_header", Bytes(hello.begin(), hello.begin() + 3));
  add("truncated_payload", Bytes(exec.begin(), exec.end() - 5));
  add("hello_then_truncated_exec", cat({hello, Bytes(exec.begin(), exec.begin() + 20)}));

  // Oversized length prefixes: the stream is refused before the payload is buffered.
  add("oversized_length", cat({header(0xFFFFFFFFu), Bytes(16, 0xAB)}));
  add("hello_then_oversized", cat({hello, header(corral::fuzz::kFuzzMaxFrame + 1), Bytes(8, 0)}));

  // Payloads verify_payload refuses.
  Bytes wrong_id = hello;
  std::copy_n("XXXX", 4, wrong_id.begin() + kHeaderBytes + 4);  // identifier follows the root offset
  add("wrong_identifier", wrong_id);
  add("empty_payload", header(0));
  add("empty_then_hello", cat({header(0), hello}));
  add("short_payload", cat({header(6), Bytes{4, 0, 'C', 'R', 'L', '1'}}));
  Bytes bad_root = hello;
  bad_root[kHeaderBytes] = 0xF0;  // root offset far past the end of the buffer
  bad_root[kHeaderBytes + 1] = 0xFF;
  add("bad_root_offset", bad_root);
  {
    flatbuffers::FlatBufferBuilder fbb(64);
    add("no_body", finish_frame(fbb, CreateMessage(fbb, 9)));
  }
  {
    // A union type this schema does not know (a newer peer's), with a table behind it.
    flatbuffers::FlatBufferBuilder fbb(64);
    auto body = CreateStatusRequest(fbb);
    add("unknown_body_type", finish_frame(fbb, CreateMessage(fbb, 13, static_cast<Body>(42), body.Union())));
  }
  {
    // Says ExecRequest, carries an ExecResult: the verifier reads its fields as the wrong types.
    flatbuffers::FlatBufferBuilder fbb(256);
    auto enforced = fbb.CreateVectorOfStrings({"a", "b"});
    ExecResultBuilder b(fbb);
    b.add_status(ExitStatus::signaled);
    b.add_exit_code(0x7fff);
    b.add_enforced(enforced);
    auto body = b.Finish();
    add("body_type_mismatch", finish_frame(fbb, CreateMessage(fbb, 14, Body::ExecRequest, body.Union())));
  }
  {
    Bytes garbage = header(32);
    std::uint32_t x = 0x12345678;
    for (int i = 0; i < 32; ++i) {
      x = x * 1664525u + 1013904223u;
      garbage.push_back(static_cast<std::uint8_t>(x >> 24));
    }
    add("garbage", garbage);
  }

  for (const auto& [name, bytes] : seeds) {
    if (bytes.size() >= 4096) {
      std::cerr << name << ": " << bytes.size() << " bytes, over the 4 KiB seed budget\n";
      return 1;
    }
    std::ofstream f(dir + "/" + name, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!f) {
      std::cerr << dir << "/" << name << ": cannot write\n";
      return 1;
    }
  }
  std::cout << "wrote " << seeds.size() << " seeds to " << dir << "\n";
  return 0;
}
