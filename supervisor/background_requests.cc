// BackgroundRequests: the handler of Poll and BackgroundStop (supervisor/requests.h); the
// commands themselves are the BackgroundTable's (supervisor/background.h).
#include "supervisor/background.h"
#include "supervisor/requests.h"

namespace corral::supervisor {

void BackgroundRequests::on_poll(const proto::Message& msg) {
  s_.queue(s_.ctx().background->poll(msg.request_id(), proto::str(msg.body_as_Poll()->id()), s_.peer().uid));
}

void BackgroundRequests::on_stop(const proto::Message& msg) {
  const proto::BackgroundStop& req = *msg.body_as_BackgroundStop();
  s_.queue(s_.ctx().background->stop(msg.request_id(), proto::str(req.id()), req.force(), s_.peer().uid));
}

}  // namespace corral::supervisor
