// Pure C++ regime: the targets jobbuf knows, by the name jobbuf.queues.target gives them. Adding
// a target is a file in this folder with its factory, and one line in target_registry.cpp.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include "redis/targets/queue_target.h"

namespace jobbuf::redis {

// The factories of the targets (each defined in its target's file).
std::unique_ptr<QueueTarget> make_list_target(const TargetSetup& setup, std::string* error);
std::unique_ptr<QueueTarget> make_stream_target(const TargetSetup& setup, std::string* error);
std::unique_ptr<QueueTarget> make_sidekiq_target(const TargetSetup& setup, std::string* error);
std::unique_ptr<QueueTarget> make_bullmq_target(const TargetSetup& setup, std::string* error);
std::unique_ptr<QueueTarget> make_celery_target(const TargetSetup& setup, std::string* error);

// What each target needs of a staged payload (defined in its target's file).
extern const PayloadShape kListPayload;
extern const PayloadShape kStreamPayload;
extern const PayloadShape kSidekiqPayload;
extern const PayloadShape kBullmqPayload;
extern const PayloadShape kCeleryPayload;

// The payload shape of the target named `name`; NULL when no target has that name.
const PayloadShape* payload_shape_of(std::string_view name) noexcept;

// The target named `name` for a queue, with its options parsed; null with *error when the name
// is unknown or an option does not parse. May throw std::bad_alloc.
std::unique_ptr<QueueTarget> make_queue_target(std::string_view name, const TargetSetup& setup, std::string* error);

}  // namespace jobbuf::redis
