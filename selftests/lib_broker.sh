# shellcheck shell=bash
# SPDX-License-Identifier: GPL-2.0-only
# lib_broker.sh - what the credential broker's tests share: a test CA and an
# upstream's certificate, a git repository for smart HTTP, and the broker's
# refusal table.  Sourced by live_broker.sh (the engine under its driver),
# live_kit_broker.sh (the engine in latchd, behind `latch attach --kit`) and
# vm_kit.sh.
#
# broker_refusal_rows: one row per check and spelling, in the order of the
# checks (docs/broker.md).  Its caller defines
#
#   row NAME STATUS REASON REQUEST   send REQUEST (\r \n escapes) from the
#                                    guest; want STATUS, a `latch:` line and
#                                    the audit reason REASON
#
# and the routes and placeholders the rows use: route echo (GET, POST, HEAD
# under /v1/echo ...; Authorization: Bearer $PH), git ($PH_GIT), nokey (a key
# the host did not give, $PH_NOKEY), badtls (an upstream whose certificate
# does not verify, $PH_BADTLS), down (an upstream port that refuses,
# $PH_DOWN), another sandbox's placeholder $PH_OTHER and a wrong one
# $PH_WRONG.  R and get() are the rows' request helpers.

# broker_test_pki DIR SAN...: DIR/ca.pem (a test CA, key ca.key) and DIR/srv.pem, srv.key, a server
# certificate it signed for the subjectAltNames given (DNS:NAME or IP:ADDR)
broker_test_pki() {
	local d=$1 san
	shift
	san=$(IFS=,; echo "$*")
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=latch-test-ca \
		-keyout "$d/ca.key" -out "$d/ca.pem" 2>/dev/null &&
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=${1#*:}" \
			-keyout "$d/srv.key" -out "$d/srv.csr" 2>/dev/null &&
		printf 'subjectAltName=%s\n' "$san" >"$d/ext.cnf" &&
		openssl x509 -req -in "$d/srv.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
			-extfile "$d/ext.cnf" -out "$d/srv.pem" 2>/dev/null
}

# broker_test_upstreams DIR SECONDS: the fake HTTPS upstream in I (selftests/broker_net.py, DIR/srv.pem):
# $SRV_A and $SRV_B port 443 (logging to DIR/up.log, git smart HTTP under /git with the Basic auth of
# $GIT_SECRET), and $SRV_A port 8443 (an alternative, DIR/up-alt.log); waits for both
broker_test_upstreams() {
	local d=$1 life=$2 net
	# a run given longer (LTS_LIMIT, a loaded machine) keeps its upstreams as long
	[ "${LTS_LIMIT:-0}" -le "$life" ] || life=$LTS_LIMIT
	net="$(dirname "${BASH_SOURCE[0]}")/broker_net.py"
	lts_bg "$LTS_I" "$d/up.out" "$LTS_PY" "$net" serve --addr "$SRV_A" --addr "$SRV_B" --port 443 \
		--cert "$d/srv.pem" --key "$d/srv.key" --log "$d/up.log" --git-root "$d/git" \
		--git-auth "Basic $GIT_SECRET" --lifetime "$life"
	lts_bg "$LTS_I" "$d/up-alt.out" "$LTS_PY" "$net" serve --addr "$SRV_A" --port 8443 --cert "$d/srv.pem" \
		--key "$d/srv.key" --log "$d/up-alt.log" --lifetime "$life"
	lts_wait_ready "$d/up.out" && lts_wait_ready "$d/up-alt.out"
}

# broker_test_git DIR: DIR/git/repo.git, a bare repository whose main branch has one commit
broker_test_git() {
	mkdir -p "$1/git" && git init -q --bare "$1/git/repo.git" &&
		git -C "$1/git/repo.git" symbolic-ref HEAD refs/heads/main &&
		(cd "$1" && git init -q work && cd work &&
			git -c user.email=t@t -c user.name=t commit -q --allow-empty -m one &&
			git push -q "$1/git/repo.git" HEAD:refs/heads/main)
}

R="\\r\\n"
# get PATH: a GET of PATH with the echo route's placeholder
get() { printf 'GET %s HTTP/1.1%sHost: x%sAuthorization: Bearer %s%s%s' "$1" "$R" "$R" "$PH" "$R" "$R"; }

broker_refusal_rows() {
	local big H="Host: x${R}Authorization: Bearer $PH${R}"
	big=$(head -c 20000 /dev/zero | tr '\0' a)
	# the request head: smuggling forms (400, the connection closes)
	row "CL and TE together" 400 "both Content-Length and Transfer-Encoding" \
		"POST /echo/v1/echo HTTP/1.1${R}${H}Content-Length: 3${R}Transfer-Encoding: chunked${R}${R}0${R}${R}"
	row "two Content-Lengths" 400 "duplicate Content-Length" \
		"POST /echo/v1/echo HTTP/1.1${R}${H}Content-Length: 3${R}Content-Length: 3${R}${R}abc"
	row "a signed Content-Length" 400 "invalid Content-Length" \
		"POST /echo/v1/echo HTTP/1.1${R}${H}Content-Length: +3${R}${R}abc"
	row "Content-Length with two numbers" 400 "invalid Content-Length" \
		"POST /echo/v1/echo HTTP/1.1${R}${H}Content-Length: 3 3${R}${R}abc"
	row "Transfer-Encoding chunked, identity" 400 "Transfer-Encoding other than one chunked" \
		"POST /echo/v1/echo HTTP/1.1${R}${H}Transfer-Encoding: chunked, identity${R}${R}0${R}${R}"
	row "Transfer-Encoding twice" 400 "Transfer-Encoding other than one chunked" \
		"POST /echo/v1/echo HTTP/1.1${R}${H}Transfer-Encoding: chunked${R}Transfer-Encoding: chunked${R}${R}0${R}${R}"
	row "a CONNECT with a Transfer-Encoding" 400 "CONNECT with a body" \
		"CONNECT allowed.test.example:443 HTTP/1.1${R}Host: allowed.test.example:443${R}Transfer-Encoding: chunked\t${R}${R}"
	row "a CONNECT with a Content-Length" 400 "CONNECT with a body" \
		"CONNECT allowed.test.example:443 HTTP/1.1${R}Host: allowed.test.example:443${R}Content-Length: 5${R}${R}hello"
	row "an obs-fold line" 400 "folded header line" "GET /echo/v1/echo HTTP/1.1${R}${H}X-A: b${R} c${R}${R}"
	row "a bare LF" 400 "bare LF in the request head" "GET /echo/v1/echo HTTP/1.1\\nHost: x${R}${R}"
	row "a bare CR" 400 "bare CR in the request head" "GET /echo/v1/echo HTTP/1.1${R}Host: x\\rX: y${R}${R}"
	row "a space in a header name" 400 "header name is not a token" "GET /echo/v1/echo HTTP/1.1${R}Ho st: x${R}${R}"
	row "a space before the colon" 400 "header name is not a token" "GET /echo/v1/echo HTTP/1.1${R}Host : x${R}${R}"
	row "a control byte in a value" 400 "invalid bytes in the request head" \
		"GET /echo/v1/echo HTTP/1.1${R}${H}X-A: a\\x01b${R}${R}"
	row "a 20 kB header" 431 "request head too large" "GET /echo/v1/echo HTTP/1.1${R}${H}X-Big: $big${R}${R}"
	# http-parser as Debian builds it takes any byte for the letters of HTTP/: here CR LF "o:" would be
	# "TTP/" and the head a GET with no header, where the broker's index reads a header "o"
	row "a version spread over two lines" 400 "request is not HTTP/1.x" "GET /echo/v1/echo H${R}o:1.1${R}${H}${R}"
	row "a space in the target" 400 "request is not HTTP/1.x" "GET /echo/v1/echo x HTTP/1.1${R}${H}${R}"
	# 1. the path's spelling
	row "a .. segment" 403 "path has a . or .. segment" "$(get /echo/v1/echo/../admin)"
	row "a . segment" 403 "path has a . or .. segment" "$(get /echo/v1/echo/./x)"
	row "a ..;param segment" 403 "path has a . or .. segment" "$(get '/echo/v1/echo/..;x=1/admin')"
	row "an encoded dot" 403 "path has an encoded dot, slash or backslash" "$(get /echo/v1/echo/%2e%2e/admin)"
	row "an encoded slash" 403 "path has an encoded dot, slash or backslash" "$(get /echo/v1/echo%2Fadmin)"
	row "an encoded backslash" 403 "path has an encoded dot, slash or backslash" "$(get /echo/v1/echo%5cadmin)"
	row "a backslash" 403 "path has a backslash" "$(get '/echo/v1/echo\\admin')"
	row "double encoding" 403 "path is double-encoded" "$(get /echo/v1/echo/%252e%252e/admin)"
	row "an empty segment" 403 "path has an empty segment" "$(get /echo/v1//echo)"
	row "an encoded letter" 403 "path encodes a character that needs no encoding" "$(get /echo/v1/%65cho)"
	row "an encoded NUL" 403 "path has bytes outside the URL grammar" "$(get /echo/v1/echo/%00)"
	row "a quote in the path" 403 "path has bytes outside the URL grammar" "$(get '/echo/v1/echo/a"b')"
	row "raw UTF-8 in the path" 403 "path has bytes outside the URL grammar" "$(get '/echo/v1/echo/\xc3\xa9')"
	# an upstream that decodes overlong UTF-8 or normalises (NFKC) reads these as '..' (issue 34): any %80-%ff
	row "overlong UTF-8 dots" 403 "path has percent-encoded non-ASCII" "$(get /echo/v1/echo/%c0%ae%c0%ae/admin)"
	row "full-width dots" 403 "path has percent-encoded non-ASCII" "$(get /echo/v1/echo/%ef%bc%8e%ef%bc%8e/admin)"
	row "a full-width solidus" 403 "path has percent-encoded non-ASCII" "$(get /echo/v1/echo%ef%bc%8fadmin)"
	row "a one-dot leader" 403 "path has percent-encoded non-ASCII" "$(get /echo/v1/echo/%E2%80%A4%E2%80%A4/admin)"
	row "encoded UTF-8 of an ordinary letter" 403 "path has percent-encoded non-ASCII" "$(get /echo/v1/echo/%c3%a9)"
	row "a plain-http proxy request" 403 "plain http proxying is not offered" "$(get http://example.test/)"
	# absolute form is read as a path only when its authority is the broker's own address and port, exactly
	row "absolute form: the broker's address, another port" 403 "plain http proxying is not offered" \
		"$(get "http://$BROKER:$((PORT + 1))/echo/v1/echo")"
	row "absolute form: the broker's address without its port" 403 "plain http proxying is not offered" \
		"$(get "http://$BROKER/echo/v1/echo")"
	row "absolute form: userinfo before the broker's address" 403 "plain http proxying is not offered" \
		"$(get "http://u@$BROKER:$PORT/echo/v1/echo")"
	row "absolute form: the broker's address as a userinfo" 403 "plain http proxying is not offered" \
		"$(get "http://$BROKER:$PORT@example.test/echo/v1/echo")"
	row "absolute form: https" 403 "plain http proxying is not offered" "$(get "https://$BROKER:$PORT/echo/v1/echo")"
	row "absolute form: the broker's own URL with no path" 403 "plain http proxying is not offered" \
		"$(get "http://$BROKER:$PORT?q=1")"
	row "order: the broker's own URL in absolute form, then a .. segment" 403 "path has a . or .. segment" \
		"$(get "http://$BROKER:$PORT/echo/v1/../admin")"
	row "the broker's own URL in absolute form, no such route" 403 "no credential route of that name" \
		"$(get "http://$BROKER:$PORT/nosuch/v1/echo")"
	row "no such route" 403 "no credential route of that name" "$(get /nosuch/v1/echo)"
	row "order: a .. segment under TRACE" 403 "path has a . or .. segment" \
		"TRACE /echo/v1/../x HTTP/1.1${R}${H}${R}"
	# 2. the method
	row "TRACE" 403 "TRACE is never forwarded" "TRACE /echo/v1/echo HTTP/1.1${R}${H}${R}"
	row "a method the route lacks" 403 "method not allowed on route" "DELETE /echo/v1/echo HTTP/1.1${R}${H}${R}"
	row "order: the method before the prefix" 403 "method not allowed on route" "PUT /echo/v9 HTTP/1.1${R}Host: x${R}${R}"
	# a header that has the upstream read another method or URL than the one checked (issue 34: forwarded before)
	row "X-HTTP-Method-Override" 403 "header overrides the method or the URL" \
		"GET /echo/v1/echo HTTP/1.1${R}${H}X-HTTP-Method-Override: DELETE${R}${R}"
	row "X-Method-Override" 403 "header overrides the method or the URL" \
		"GET /echo/v1/echo HTTP/1.1${R}${H}x-method-override: DELETE${R}${R}"
	row "X-Original-URL" 403 "header overrides the method or the URL" \
		"GET /echo/v1/echo HTTP/1.1${R}${H}X-Original-URL: /v2/admin${R}${R}"
	row "X-Rewrite-URL" 403 "header overrides the method or the URL" \
		"GET /echo/v1/echo HTTP/1.1${R}${H}X-Rewrite-URL: /v2/admin${R}${R}"
	# 3. the path prefix, on segment boundaries
	row "a prefix that is not a segment" 403 "path not allowed on route" "$(get /echo/v1/echo_admin)"
	row "a path outside the prefixes" 403 "path not allowed on route" "$(get /echo/v2/echo)"
	row "order: the prefix before the placeholder" 403 "path not allowed on route" \
		"GET /echo/v2/x HTTP/1.1${R}Host: x${R}${R}"
	# 4. the placeholder
	row "the placeholder in the query" 403 "placeholder also sent in the URL" "$(get "/echo/v1/echo?key=$PH")"
	row "the placeholder in the path" 403 "placeholder also sent in the URL" "$(get "/echo/v1/echo/$PH")"
	row "the placeholder percent-encoded in the query" 403 "placeholder also sent in the URL" \
		"$(get "/echo/v1/echo?k=$(sed 's/-/%2D/g' <<<"$PH")")"
	row "the placeholder percent-encoded twice in the query" 403 "placeholder also sent in the URL" \
		"$(get "/echo/v1/echo?k=$(sed 's/-/%252D/g' <<<"$PH")")"
	row "the placeholder in another header" 403 "placeholder sent in another header" \
		"GET /echo/v1/echo HTTP/1.1${R}${H}X-Api-Key: $PH${R}${R}"
	row "the placeholder in upper case in another header" 403 "placeholder sent in another header" \
		"GET /echo/v1/echo HTTP/1.1${R}${H}X-Api-Key: ${PH^^}${R}${R}"
	row "the placeholder's random part alone in another header" 403 "placeholder sent in another header" \
		"GET /echo/v1/echo HTTP/1.1${R}${H}X-Api-Key: ${PH##*-}${R}${R}"
	# a '%' before the random part: decoding joins it with the random part's first two hex digits
	row "the placeholder's random part after a '%' in another header" 403 "placeholder sent in another header" \
		"GET /echo/v1/echo HTTP/1.1${R}${H}X-Api-Key: %${PH##*-}${R}${R}"
	row "the placeholder's random part after a '%25' in another header" 403 "placeholder sent in another header" \
		"GET /echo/v1/echo HTTP/1.1${R}${H}X-Api-Key: %25${PH##*-}${R}${R}"
	row "another route's placeholder percent-encoded in another header" 403 "placeholder sent in another header" \
		"GET /echo/v1/echo HTTP/1.1${R}${H}X-Api-Key: $(sed 's/-/%2d/g' <<<"$PH_GIT")${R}${R}"
	row "no placeholder" 401 "placeholder credential missing or wrong" "GET /echo/v1/echo HTTP/1.1${R}Host: x${R}${R}"
	row "a wrong placeholder" 403 "placeholder credential missing or wrong" \
		"GET /echo/v1/echo HTTP/1.1${R}Authorization: Bearer $PH_WRONG${R}${R}"
	row "another sandbox's placeholder" 403 "placeholder of another sandbox" \
		"GET /echo/v1/echo HTTP/1.1${R}Authorization: Bearer $PH_OTHER${R}${R}"
	row "another route's placeholder" 403 "placeholder credential missing or wrong" \
		"GET /echo/v1/echo HTTP/1.1${R}Authorization: Bearer $PH_GIT${R}${R}"
	row "a wrong Basic password" 403 "placeholder credential missing or wrong" \
		"GET /echo/v1/echo HTTP/1.1${R}Authorization: Basic $(printf 'x:%s' "$PH_WRONG" | base64 -w0)${R}${R}"
	# decoded to 3 bytes with 4 pads, this read past the decode buffer (fuzz_broker found it)
	row "Basic of padding alone" 403 "placeholder credential missing or wrong" \
		"GET /echo/v1/echo HTTP/1.1${R}Authorization: Basic ====${R}${R}"
	# after the checks: the host side
	row "a secret the host did not give" 403 "secret not set on the host" \
		"GET /nokey/v1/echo HTTP/1.1${R}Authorization: Bearer $PH_NOKEY${R}${R}"
	row "an upstream whose certificate does not verify" 502 "upstream TLS verification failed" \
		"GET /badtls/v1/x HTTP/1.1${R}Authorization: Bearer $PH_BADTLS${R}${R}"
	row "an upstream that refuses the connection" 502 "upstream unreachable" \
		"GET /down/v1/x HTTP/1.1${R}Authorization: Bearer $PH_DOWN${R}${R}"
	row "a content-encoded response" 502 "upstream response is content-encoded" "$(get /echo/v1/gzip)"
	# http-parser decodes "gzip, chunked" as chunked: the guest got gzip the scrubber could not read
	row "a response under Transfer-Encoding: gzip, chunked" 502 "upstream response unreadable" "$(get /echo/v1/tegzip)"
	# a 1xx has no body (RFC 9112 6.3): its bytes stand where the next head should; they went to the guest
	row "a 103 with a body" 502 "upstream response unreadable" "$(get /echo/v1/hintbody)"
	row "a 100 with a chunked body" 502 "upstream response unreadable" "$(get /echo/v1/continuebody)"
	# http-parser takes a name for Transfer-Encoding by its first 17 bytes: it read this chunked body raw,
	# chunk framing and all, to the connection's end (the key split by the framing passed the scrubber)
	row "a Transfer-Encodingx after Transfer-Encoding: chunked" 502 "upstream response unreadable" \
		"$(get /echo/v1/teprefix)"
	# the broker sent no Upgrade: what follows a 101 is not HTTP
	row "a 101 nobody asked for" 502 "upstream response unreadable" "$(get /echo/v1/upgrade)"
}
