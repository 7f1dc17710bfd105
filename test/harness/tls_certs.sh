# Test harness: makes the TLS certificates the TLS tests use, with the openssl CLI, into a
# directory (EC P-256 keys, fast to make). Run as `bash tls_certs.sh DIR`, or source it and call
# jb_make_tls_certs DIR. Files (each .crt with its .key):
#   ca            the test CA (self-signed)
#   server        signed by ca, for DNS:localhost and IP:127.0.0.1
#   expired       signed by ca, for the same names, expired yesterday
#   wrongname     signed by ca, for DNS:wrong.example only
#   client        signed by ca, a client certificate (mutual TLS)
#   other-ca      another CA, which signed none of them

jb_make_tls_certs() {
  local dir=$1
  mkdir -p "$dir" || return 1
  (
    set -e
    cd "$dir"
    newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }
    selfsigned() {
      newkey "$1"
      openssl req -x509 -new -key "$1.key" -out "$1.crt" -days 30 -subj "/CN=jobbuf test $1" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
    }
    # Validity of DAYS from now; a negative DAYS gives a certificate that expired then (OpenSSL
    # 3.0 takes -days -1; 3.4 and later refuse it and take explicit dates instead).
    validity() {
      if [ "$1" -ge 0 ]; then echo "-days $1"
      elif openssl x509 -help 2>&1 | grep -q -- '-not_after'; then
        echo "-not_before $(date -u -d "$(( $1 - 1 )) days" +%Y%m%d%H%M%SZ)" \
             "-not_after $(date -u -d "$1 days" +%Y%m%d%H%M%SZ)"
      else echo "-days $1"
      fi
    }
    # signed NAME DAYS EXTENSIONS
    signed() {
      newkey "$1"
      openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=jobbuf test $1" 2>/dev/null
      printf '%s\n' "$3" > "$1.ext"
      # shellcheck disable=SC2046
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial $(validity "$2") \
        -extfile "$1.ext" -out "$1.crt" 2>/dev/null
      rm -f "$1.csr" "$1.ext"
    }
    selfsigned ca
    selfsigned other-ca
    signed server 30 "subjectAltName=DNS:localhost,IP:127.0.0.1"
    signed expired -1 "subjectAltName=DNS:localhost,IP:127.0.0.1"
    signed wrongname 30 "subjectAltName=DNS:wrong.example"
    signed client 30 "extendedKeyUsage=clientAuth"
    chmod 644 ./*.crt ./*.key
  )
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  jb_make_tls_certs "${1:?usage: tls_certs.sh DIR}"
fi
