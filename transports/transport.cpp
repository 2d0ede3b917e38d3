#include "transports/transport.hpp"

#include <cstring>

namespace braid {

void TransportHost::deliver_arrived(int src, const Envelope& env, const void* payload, std::size_t bytes,
                                    Transport* from) {
  if (Request* r = take_posted(src, env)) {
    r->source = src;
    if (auto err = receive_error(*r, src, env, bytes)) {
      complete(*r, err);
      return;
    }
    if (bytes) std::memcpy(r->buf, payload, bytes);
    r->received = bytes;
    complete(*r);
    return;
  }
  // Kept as a copy: the transport's memory (a ring slot) is reused at once.
  auto u = std::make_unique<Unexpected>();
  u->kind = Unexpected::Kind::Eager;
  u->src = src;
  u->env = env;
  u->bytes = bytes;
  u->data.reset(new std::uint8_t[bytes ? bytes : 1]);
  if (bytes) std::memcpy(u->data.get(), payload, bytes);
  u->arrived = bytes;
  u->transport = from;
  add_unexpected(std::move(u));
}

void TransportHost::deliver(std::unique_ptr<Unexpected> owned, Request& r) {
  Unexpected& u = *owned;
  r.source = u.src;
  if (auto err = receive_error(r, u.src, u.env, u.bytes)) {
    complete(r, err);
    if (u.kind == Unexpected::Kind::Local) complete(*u.local_send, rejected_send(*u.local_send, refusal_of(r)));
    else if (u.kind == Unexpected::Kind::Rendezvous) u.transport->reject(std::move(owned), refusal_of(r));
    else if (u.arrived < u.bytes) u.transport->claim(std::move(owned), nullptr);
    return;
  }
  r.received = u.bytes;
  switch (u.kind) {
    case Unexpected::Kind::Local:  // a send to oneself, still in the sender's buffer
      if (u.bytes) std::memcpy(r.buf, u.local_send->buf, u.bytes);
      complete(*u.local_send);
      complete(r);
      return;
    case Unexpected::Kind::Eager:
      if (u.arrived == u.bytes) {
        if (u.bytes) std::memcpy(r.buf, u.data.get(), u.bytes);
        complete(r);
        return;
      }
      u.transport->claim(std::move(owned), &r);
      return;
    case Unexpected::Kind::Rendezvous:
      u.transport->claim(std::move(owned), &r);
      return;
  }
}

void TransportHost::discard(std::unique_ptr<Unexpected> owned) {
  Unexpected& u = *owned;
  if (u.kind == Unexpected::Kind::Local) complete(*u.local_send);
  else if (u.kind == Unexpected::Kind::Rendezvous || u.arrived < u.bytes)
    u.transport->claim(std::move(owned), nullptr);
}

}  // namespace braid
