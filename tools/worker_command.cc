// corral worker start|eval|stop|list|logs.
#include <fcntl.h>
#include <unistd.h>

#include <iostream>
#include <sstream>

#include "runtime/units.h"
#include "tools/commands.h"
#include "supervisor/json_text.h"
#include "worker_proto/client.h"

namespace corral::cli {

int run_worker_start(const WorkerOptions& o) {
  if (o.python == !o.argv.empty())
    return complain(kUsage, o.python ? "give --python or -- /ABS/PATH ARGS, not both"
                                     : "no worker program: use --python or -- /ABS/PATH/RUNTIME ARGS...");
  std::vector<std::string> workspaces;
  for (const auto& w : o.workspaces) workspaces.push_back(absolute(w));
  proto::WorkerStartArgs args;
  args.name = o.name;
  args.scope = o.scope;
  args.argv = o.argv;
  args.python = o.python;
  args.mode = wire_mode(o.mode);
  args.network = wire_network(o.net);
  args.workspaces = std::move(workspaces);
  for (const auto& s : o.allow_sockets) args.allow_sockets.push_back(absolute(s));
  args.memory_bytes = o.memory;
  args.pids = o.pids;
  args.cpus = o.cpus.value_or(0);
  args.idle_timeout_ms = o.idle_timeout_ms.value_or(0);
  auto frame = proto::make_worker_start(1, args);
  proto::Received reply;
  if (int rc = request(o.socket, frame, reply); rc != kOk) return rc;
  const proto::WorkerStarted* s = reply.msg->body_as_WorkerStarted();
  if (!s) return complain(kFailed, "unexpected reply to worker start");
  std::cerr << "worker " << proto::str(s->name()) << " started in scope " << proto::str(s->scope()) << "\n";
  std::cout << proto::str(s->name()) << std::endl;
  return kOk;
}

int run_worker_eval(const WorkerOptions& o) {
  std::string request;
  if (o.request) {
    request = *o.request;
  } else {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    request = ss.str();
  }
  auto connected = proto::Client::connect(o.socket, "corral-worker-eval");
  if (!connected) return complain(kFailed, connected.error().message);
  proto::Client& client = **connected;
  proto::WorkerEvalArgs args;
  args.name = o.name;
  args.scope = o.scope;
  args.request = std::move(request);
  args.timeout_ms = o.timeout_ms.value_or(0);
  args.reset = o.reset;
  args.serve_host_calls = !o.host_cmd.empty();
  auto frame = proto::make_worker_eval(1, args);
  if (auto sent = client.send(frame); !sent) return complain(kFailed, sent.error().message);
  for (;;) {
    auto r = client.receive();
    if (!r) return complain(kFailed, r.error().message);
    if (r->msg->request_id() != 1 && r->msg->request_id() != 0) continue;
    if (const proto::HostCall* call = r->msg->body_as_HostCall()) {
      std::string out, err;
      std::string_view in;
      if (call->data()) in = {reinterpret_cast<const char*>(call->data()->data()), call->data()->size()};
      if (!run_shell(o.host_cmd, in, out, err)) err = "--host-cmd " + err;
      if (auto sent = client.send(proto::make_host_reply(1, call->call_id(), out, err)); !sent)
        return complain(kFailed, sent.error().message);
      continue;
    }
    if (const proto::Error* e = r->msg->body_as_Error()) {
      return complain(kFailed, proto::str(e->message()));
    }
    if (const proto::WorkerEvalResult* res = r->msg->body_as_WorkerEvalResult()) {
      if (res->reply()) write_all(1, {reinterpret_cast<const char*>(res->reply()->data()), res->reply()->size()});
      if (res->reply() && res->reply()->size() && res->reply()->data()[res->reply()->size() - 1] != '\n' && ::isatty(1))
        write_all(1, "\n");
      return kOk;
    }
  }
}

int run_worker_stop(const WorkerOptions& o) {
  proto::Received reply;
  return request(o.socket, proto::make_worker_stop(1, o.name, o.scope, o.force), reply);
}

int run_worker_list(const WorkerOptions& o) {
  proto::Received reply;
  if (int rc = request(o.socket, proto::make_worker_list(1, o.scope), reply); rc != kOk) return rc;
  const proto::WorkerList* list = reply.msg->body_as_WorkerList();
  if (!list) return complain(kFailed, "unexpected reply to worker list");
  Json j = Json::array();
  if (list->workers()) {
    for (const auto* w : *list->workers()) {
      std::string argv;
      std::vector<std::string> args;
      if (w->argv())
        for (const auto* a : *w->argv()) {
          args.push_back(a->str());
          if (!argv.empty()) argv += ' ';
          argv += a->str();
        }
      if (!o.json) {
        std::cout << proto::str(w->name()) << "\tscope=" << proto::str(w->scope()) << "\tstate=" << proto::str(w->state())
                  << "\tevaluations=" << w->evaluations() << "\t" << argv << "\n";
        continue;
      }
      j.push_back({{"name", proto::str(w->name())},
                   {"scope", proto::str(w->scope())},
                   {"state", proto::str(w->state())},
                   {"evaluations", w->evaluations()},
                   {"argv", args}});
    }
  }
  if (o.json) std::cout << json_text(j) << "\n";
  return kOk;
}

int run_worker_logs(const WorkerOptions& o) {
  proto::Received reply;
  if (int rc = request(o.socket, proto::make_worker_logs(1, o.name, o.scope), reply); rc != kOk) return rc;
  const proto::WorkerLogs* logs = reply.msg->body_as_WorkerLogs();
  if (!logs) return complain(kFailed, "unexpected reply to worker logs");
  if (logs->data()) write_all(1, {reinterpret_cast<const char*>(logs->data()->data()), logs->data()->size()});
  return kOk;
}

}  // namespace corral::cli
