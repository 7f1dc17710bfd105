# `require "jobbuf/active_job"`: loads the ActiveJob adapter, so that
# `config.active_job.queue_adapter = :jobbuf` and `ActiveJob::Base.queue_adapter = :jobbuf` find
# ActiveJob::QueueAdapters::JobbufAdapter.
require "jobbuf/version"
require "active_job/queue_adapters/jobbuf_adapter"
