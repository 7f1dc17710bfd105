# `require "jobbuf/sidekiq"`, then `Jobbuf::Sidekiq.transactional_push!` (in place of Sidekiq's own
# `Sidekiq.transactional_push!`): perform_async / perform_in / set(...) inside an ActiveRecord
# transaction stage the job in that transaction with jobbuf (Jobbuf::Sidekiq::Middleware).
require "sidekiq"
require "jobbuf/version"
require "jobbuf/sidekiq/middleware"

module Jobbuf
  module Sidekiq
    module_function

    # Adds the middleware last in the client chain, for clients (web processes, scripts) and for
    # jobs that push jobs inside the Sidekiq server. connection_class: the ActiveRecord class whose
    # transactions the jobs follow.
    def transactional_push!(connection_class: ::ActiveRecord::Base)
      ::Sidekiq.configure_client { |config| add_to(config, connection_class) }
      ::Sidekiq.configure_server { |config| add_to(config, connection_class) }
    end

    def add_to(config, connection_class)
      config.client_middleware do |chain|
        chain.remove(Middleware)
        chain.add(Middleware, connection_class)
      end
    end

    # The jobbuf id of the last job this thread staged through the middleware.
    def last_staged_id
      Thread.current[:jobbuf_last_staged_id]
    end
  end
end
