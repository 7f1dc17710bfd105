# The jobbuf gem: an ActiveJob queue adapter and a Sidekiq client middleware that stage jobs in the
# caller's PostgreSQL transaction with the jobbuf extension, for an unmodified Sidekiq server to run.
require_relative "lib/jobbuf/version"

Gem::Specification.new do |spec|
  spec.name = "jobbuf"
  spec.version = Jobbuf::VERSION
  spec.summary = "Transactional perform_later: an ActiveJob adapter staging Sidekiq jobs with jobbuf_stage"
  spec.description = <<~TEXT
    config.active_job.queue_adapter = :jobbuf makes perform_later stage the job in PostgreSQL,
    inside the caller's ActiveRecord transaction, with the jobbuf extension's jobbuf_stage. The
    extension's worker delivers it to Redis after the commit as the job Sidekiq's own ActiveJob
    adapter would push, so an unmodified Sidekiq server runs it; a rollback drops it.
    Jobbuf::Sidekiq.transactional_push! does the same for plain Sidekiq jobs (perform_async,
    perform_in, set(...)) pushed inside an ActiveRecord transaction (require "jobbuf/sidekiq").
  TEXT
  spec.authors = ["jobbuf contributors"]
  spec.license = "PostgreSQL"
  spec.files = Dir[File.join(__dir__, "lib/**/*.rb")].map { |f| f.delete_prefix("#{__dir__}/") }
  spec.require_paths = ["lib"]
  spec.required_ruby_version = ">= 2.7"
  spec.add_runtime_dependency "activejob", ">= 6.1"
  spec.add_runtime_dependency "activerecord", ">= 6.1"
end
