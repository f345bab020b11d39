use super::*;

fn parts(headers: &[(&'static str, &'static str)]) -> Parts {
    let mut request = http::Request::builder();
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(()).unwrap().into_parts().0
}

impl ScopeSource {
    fn scope(&self, parts: &Parts) -> Option<Vec<u8>> {
        let scope = self.scope_of(parts).expect("no panic");
        scope.map(|scope| scope.to_vec())
    }
}

fn header(name: &'static str) -> ScopeSource {
    ScopeSource::Header(HeaderName::from_static(name))
}

#[test]
fn a_header_value_never_encodes_like_a_principal_or_another_header() {
    let from_header = header("x-user").scope(&parts(&[("x-user", "alice")]));
    let from_other = header("x-tenant").scope(&parts(&[("x-tenant", "alice")]));
    let principal = ScopeSource::Extract(Arc::new(|_| Some("alice".to_owned())));
    let from_function = principal.scope(&parts(&[]));
    assert!(from_header.is_some() && from_other.is_some() && from_function.is_some());
    assert_ne!(from_header, from_other);
    assert_ne!(from_header, from_function);
    assert_ne!(from_other, from_function);
}

#[test]
fn an_empty_value_is_no_scope() {
    assert_eq!(header("x-user").scope(&parts(&[("x-user", "")])), None);
    let empty = ScopeSource::Extract(Arc::new(|_| Some(String::new())));
    assert_eq!(empty.scope(&parts(&[])), None);
}

fn mcp(principal: Option<ScopeSource>, narrowed: bool) -> ScopeSource {
    ScopeSource::Narrowed {
        principal: principal.map(Box::new),
        by: HeaderName::from_static("mcp-session-id"),
        narrowed,
        credentials: Arc::new([]),
        shared: false,
    }
}

fn unnamed(credential: bool, shared: bool) -> ScopeSource {
    ScopeSource::Narrowed {
        principal: None,
        by: HeaderName::from_static("mcp-session-id"),
        narrowed: true,
        credentials: if credential {
            Arc::new([http::header::AUTHORIZATION])
        } else {
            Arc::new([])
        },
        shared,
    }
}

#[test]
fn without_a_principal_or_session_the_credential_names_the_caller_hashed() {
    let scope = unnamed(true, false);
    let alice = scope.scope(&parts(&[("authorization", "Bearer alice-token")]));
    let bob = scope.scope(&parts(&[("authorization", "Bearer bob-token")]));
    assert!(alice.is_some() && alice != bob);
    let bytes = alice.unwrap();
    assert!(
        !bytes.windows(11).any(|w| w == b"alice-token"),
        "the token is kept only hashed"
    );
    // A session narrows the credential, and nothing names a caller without either.
    let narrowed = |token: &'static str, session: &'static str| {
        scope.scope(&parts(&[
            ("authorization", token),
            ("mcp-session-id", session),
        ]))
    };
    assert_ne!(narrowed("Bearer a", "s"), narrowed("Bearer b", "s"));
    assert_ne!(narrowed("Bearer a", "s"), narrowed("Bearer a", "t"));
    assert_ne!(
        narrowed("Bearer a", "s"),
        scope.scope(&parts(&[("mcp-session-id", "s")]))
    );
    assert_eq!(scope.scope(&parts(&[])), None);
    assert_eq!(
        unnamed(false, false).scope(&parts(&[("authorization", "Bearer a")])),
        None
    );
}

#[test]
fn where_the_session_is_ignored_two_tokens_sending_one_session_id_are_apart() {
    let scope = unnamed(true, false);
    let of = |token: &'static str| {
        let parts = parts(&[("authorization", token), ("mcp-session-id", "same")]);
        let scope = scope.scope_in(&parts, Narrowing::Ignored).unwrap();
        scope.map(|scope| scope.to_vec())
    };
    assert!(of("Bearer a").is_some());
    assert_ne!(of("Bearer a"), of("Bearer b"));
}

#[test]
fn a_header_that_names_the_caller_twice_names_no_one() {
    let twice = |name: &'static str| {
        let mut request = http::Request::builder();
        for value in ["a", "b"] {
            request = request.header(name, value);
        }
        request.body(()).unwrap().into_parts().0
    };
    let repeated = |name: &'static str| Err(ScopeFault::Repeated(HeaderName::from_static(name)));
    assert_eq!(
        header("x-user").scope_of(&twice("x-user")),
        repeated("x-user")
    );
    let narrowed = mcp(Some(header("x-user")), true);
    let parts = twice("mcp-session-id");
    assert_eq!(
        narrowed.scope_of(&parts).map(|_| ()),
        repeated("mcp-session-id").map(|_: Option<Scope>| ())
    );
    // In the stateless era the session is not read: two of them fault nothing.
    let alone = mcp(None, true);
    assert!(alone.scope_in(&parts, Narrowing::Ignored).is_ok());
    let by_token = unnamed(true, false);
    assert_eq!(
        by_token.scope_of(&twice("authorization")).map(|_| ()),
        repeated("authorization").map(|_: Option<Scope>| ())
    );
}

#[test]
fn a_shared_scope_is_taken_only_where_nothing_else_names_the_caller() {
    let scope = unnamed(true, true);
    let shared = scope.scope(&parts(&[]));
    assert!(shared.is_some());
    assert_eq!(shared, scope.scope(&parts(&[("x-other", "1")])));
    assert_ne!(
        shared,
        scope.scope(&parts(&[("authorization", "Bearer a")]))
    );
    assert_ne!(shared, scope.scope(&parts(&[("mcp-session-id", "S")])));
}

#[test]
fn a_session_narrows_a_configured_principal_and_never_replaces_it() {
    let scope = mcp(Some(header("x-user")), true);
    let alice = scope.scope(&parts(&[("x-user", "alice"), ("mcp-session-id", "s1")]));
    let alice_other = scope.scope(&parts(&[("x-user", "alice"), ("mcp-session-id", "s2")]));
    let bob = scope.scope(&parts(&[("x-user", "bob"), ("mcp-session-id", "s1")]));
    assert!(alice.is_some() && alice != alice_other && alice != bob);
    // The principal is required: a session alone is no scope.
    assert_eq!(scope.scope(&parts(&[("mcp-session-id", "s1")])), None);
    // A session id that spells another principal's scope is still narrowed by the sender's own.
    let planted = scope.scope(&parts(&[
        ("x-user", "mallory"),
        ("mcp-session-id", "alice"),
    ]));
    assert_ne!(
        planted,
        header("x-user").scope(&parts(&[("x-user", "alice")]))
    );
    assert_ne!(planted, alice);
}

#[test]
fn principal_pairs_are_framed_so_no_two_encode_alike() {
    let scope = mcp(Some(header("x-user")), true);
    let a = scope.scope(&parts(&[("x-user", "a:b"), ("mcp-session-id", "c")]));
    let b = scope.scope(&parts(&[("x-user", "a"), ("mcp-session-id", "b:c")]));
    assert_ne!(a, b);
}

#[test]
fn without_a_configured_principal_the_session_alone_is_the_scope() {
    let scope = mcp(None, true);
    assert!(scope.scope(&parts(&[("mcp-session-id", "s1")])).is_some());
    assert_eq!(scope.scope(&parts(&[])), None);
    let by_principal = mcp(Some(header("x-user")), false);
    assert_eq!(
        by_principal.scope(&parts(&[("x-user", "a"), ("mcp-session-id", "s1")])),
        by_principal.scope(&parts(&[("x-user", "a"), ("mcp-session-id", "s2")])),
    );
}

#[test]
fn a_scopes_share_is_its_principal_whatever_the_session() {
    let scope = mcp(Some(header("x-user")), true);
    let share = |session: &'static str| {
        let parts = parts(&[("x-user", "alice"), ("mcp-session-id", session)]);
        let scope = scope.scope_of(&parts).unwrap().unwrap();
        scope.share(ScopeHash::of(&scope))
    };
    assert_eq!(share("s1"), share("s2"));
    let alone = header("x-user").scope_of(&parts(&[("x-user", "alice")]));
    let alone = alone.unwrap().unwrap();
    assert_eq!(alone.share(ScopeHash::of(&alone)), ScopeHash::of(&alone));
}

#[test]
fn a_credential_is_the_share_whatever_session_narrows_it() {
    let scope = unnamed(true, false);
    let share = |token: &'static str, session: &'static str| {
        let parts = parts(&[("authorization", token), ("mcp-session-id", session)]);
        let scope = scope.scope_of(&parts).unwrap().unwrap();
        scope.share(ScopeHash::of(&scope))
    };
    assert_eq!(share("Bearer a", "s1"), share("Bearer a", "s2"));
    assert_ne!(share("Bearer a", "s1"), share("Bearer b", "s1"));
}

#[test]
fn every_configured_credential_header_names_the_caller() {
    let scope = ScopeSource::Narrowed {
        principal: None,
        by: HeaderName::from_static("x-session-id"),
        narrowed: true,
        credentials: Arc::new([
            HeaderName::from_static("authorization"),
            HeaderName::from_static("x-api-key"),
        ]),
        shared: false,
    };
    let of = |headers: &[(&'static str, &'static str)]| scope.scope(&parts(headers));
    let key = of(&[("x-api-key", "k1")]);
    assert!(key.is_some());
    assert_ne!(key, of(&[("x-api-key", "k2")]));
    // A value is hashed with its header's name: the same token in another header is another
    // caller.
    assert_ne!(key, of(&[("authorization", "k1")]));
    assert_ne!(key, of(&[("x-api-key", "k1"), ("authorization", "t")]));
}
