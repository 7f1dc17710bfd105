# The JSON text of a payload jobbuf stages (jsonb), as Sidekiq's own JSON would carry it to its
# server. Two values jsonb cannot take as Ruby's JSON writes them are handled here, before any
# statement reaches the caller's transaction:
# - a NUL character (in a string or a hash key): jsonb cannot store "\u0000", so PostgreSQL would
#   refuse the statement and abort the caller's transaction: raise a NulCharacterError naming
#   where it is instead, with the transaction untouched;
# - a Float Ruby writes with a positive exponent (1e15 and up: 1.0e+16): jsonb keeps it as the
#   number 10000000000000000, which Sidekiq's JSON reads back as an Integer. It is written with
#   the same digits, positionally and with a decimal point ("10000000000000000.0"), which jsonb
#   keeps and Ruby's JSON reads back as the same Float.
require "json"

module Jobbuf
  class NulCharacterError < ArgumentError; end

  module JsonText
    # Ruby's shortest representation of a Float with a positive exponent: 1.0e+16, -2.5e+20 (json
    # 2.x), 1e+16 (json 3.x writes no ".0").
    EXPONENT_FORM = /\A(-?)(\d)(?:\.(\d+))?e\+(\d+)\z/.freeze

    module_function

    def generate(value)
      out = +""
      write(out, value, "payload")
      out
    end

    def write(out, value, path)
      case value
      when Hash
        out << "{"
        value.each_with_index do |(key, item), i|
          out << "," if i.positive?
          key = key.to_s
          refuse_nul(key, "#{path} key #{key.inspect}")
          out << JSON.generate(key) << ":"
          write(out, item, "#{path}[#{key.inspect}]")
        end
        out << "}"
      when Array
        out << "["
        value.each_with_index do |item, i|
          out << "," if i.positive?
          write(out, item, "#{path}[#{i}]")
        end
        out << "]"
      when Float
        out << float_text(value)
      when String, Symbol
        refuse_nul(value.to_s, path)
        out << JSON.generate(value.to_s)
      else
        text = JSON.generate(value)
        refuse_nul(JSON.parse("[#{text}]")[0].to_s, path) if text.include?("\\u0000")
        out << text
      end
    end

    # The same digits as Ruby's own text, without the exponent: 1.0e+16 -> 10000000000000000.0,
    # 1.0000000000000002e+15 -> 1000000000000000.2.
    def float_text(value)
      text = JSON.generate(value)
      sign, first, rest, exponent = EXPONENT_FORM.match(text)&.captures
      return text unless sign

      digits = first + rest.to_s.sub(/0+\z/, "")
      point = 1 + exponent.to_i
      return "#{sign}#{digits.ljust(point, "0")}.0" if digits.length <= point

      "#{sign}#{digits[0, point]}.#{digits[point..]}"
    end

    def refuse_nul(text, path)
      return unless text.include?("\0")

      raise NulCharacterError,
            "jobbuf: #{path} contains a NUL character (\\u0000), which PostgreSQL's jsonb cannot store; " \
            "nothing was staged and your transaction is untouched. Remove it or encode the value (e.g. Base64)."
    end
  end
end
