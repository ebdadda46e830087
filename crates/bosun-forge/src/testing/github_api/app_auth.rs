//! GitHub App authentication as GitHub checks it: a JWT signed RS256 with
//! the App's private key, `iss` the App's id, `iat` not in the future,
//! `exp` in the future and at most 10 minutes after `iat`; and, for tests,
//! such a JWT signed with the fixture key (`tests/fixtures/github/app-*`).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::signature::{self, RsaKeyPair, UnparsedPublicKey};
use serde_json::{json, Value};

/// The `rsaEncryption` algorithm of a SubjectPublicKeyInfo.
const RSA_ENCRYPTION: spki::ObjectIdentifier =
    spki::ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");

/// GitHub's texts refusing a JWT (401).
pub(super) const JWT_UNDECODABLE: &str = "A JSON web token could not be decoded";
pub(super) const JWT_EXP_TOO_FAR: &str = "'Expiration time' claim ('exp') is too far in the future";
pub(super) const JWT_EXPIRED: &str = "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires";
pub(super) const JWT_IAT: &str =
    "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued";

/// Seconds a JWT's `iat` may be ahead of the fake's clock (clock drift, as
/// GitHub allows some).
const IAT_LEEWAY: i64 = 60;

/// An App's public key as ring verifies with it: the PKCS#1 RSAPublicKey,
/// from a PEM `PUBLIC KEY` (SubjectPublicKeyInfo, what `openssl rsa
/// -pubout` writes) or `RSA PUBLIC KEY` (PKCS#1).
pub(super) fn rsa_public_key(public_key_pem: &str) -> Vec<u8> {
    let pem = pem::parse(public_key_pem).expect("an App's public key is PEM");
    match pem.tag() {
        "RSA PUBLIC KEY" => pem.contents().to_vec(),
        "PUBLIC KEY" => {
            let info = spki::SubjectPublicKeyInfoRef::try_from(pem.contents())
                .expect("a SubjectPublicKeyInfo");
            assert_eq!(info.algorithm.oid, RSA_ENCRYPTION, "an RSA public key");
            info.subject_public_key.raw_bytes().to_vec()
        }
        tag => panic!("an App's public key is a PEM PUBLIC KEY or RSA PUBLIC KEY, not {tag}"),
    }
}

/// A JWT's claims as read, before [`verify`] checks its signature (once
/// the App `iss` names is known) and its times.
pub(super) struct Jwt {
    pub iss: String,
    iat: Option<i64>,
    exp: Option<i64>,
    signed: Vec<u8>,
    signature: Vec<u8>,
}

/// `token` read as a JWT: `None` when it is not one (not three
/// dot-separated base64url parts whose first is a JSON header: then it is
/// a token), else its claims or GitHub's text refusing it.
pub(super) fn read_jwt(token: &str) -> Option<Result<Jwt, &'static str>> {
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 {
        return None;
    }
    let header: Value = URL_SAFE_NO_PAD
        .decode(parts[0])
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())?;
    Some((|| {
        if header["alg"] != "RS256" {
            return Err(JWT_UNDECODABLE);
        }
        let claims: Value = URL_SAFE_NO_PAD
            .decode(parts[1])
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or(JWT_UNDECODABLE)?;
        let iss = match &claims["iss"] {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => return Err(JWT_UNDECODABLE),
        };
        Ok(Jwt {
            iss,
            iat: claims["iat"].as_i64(),
            exp: claims["exp"].as_i64(),
            signed: format!("{}.{}", parts[0], parts[1]).into_bytes(),
            signature: URL_SAFE_NO_PAD
                .decode(parts[2])
                .map_err(|_| JWT_UNDECODABLE)?,
        })
    })())
}

/// Checks `jwt`'s signature against the App's key (PKCS#1 DER) and its
/// times against `now` (Unix seconds), in GitHub's order and texts.
pub(super) fn verify(jwt: &Jwt, rsa_public_key: &[u8], now: i64) -> Result<(), &'static str> {
    UnparsedPublicKey::new(&signature::RSA_PKCS1_2048_8192_SHA256, rsa_public_key)
        .verify(&jwt.signed, &jwt.signature)
        .map_err(|_| JWT_UNDECODABLE)?;
    let iat = jwt
        .iat
        .filter(|iat| *iat <= now + IAT_LEEWAY)
        .ok_or(JWT_IAT)?;
    let exp = jwt.exp.filter(|exp| *exp > now).ok_or(JWT_EXPIRED)?;
    if exp - iat > 600 {
        return Err(JWT_EXP_TOO_FAR);
    }
    Ok(())
}

/// A JWT for App `app_id` with `iat` and `exp` (Unix seconds), signed with
/// the private key `private_key_pem` (PEM `RSA PRIVATE KEY`, PKCS#1, the
/// form GitHub gives an App's key in, or `PRIVATE KEY`, PKCS#8).
pub fn app_jwt(app_id: u64, private_key_pem: &str, iat: i64, exp: i64) -> String {
    let pem = pem::parse(private_key_pem).expect("a private key is PEM");
    let key = match pem.tag() {
        "RSA PRIVATE KEY" => RsaKeyPair::from_der(pem.contents()),
        "PRIVATE KEY" => RsaKeyPair::from_pkcs8(pem.contents()),
        tag => panic!("an App's private key is a PEM RSA PRIVATE KEY or PRIVATE KEY, not {tag}"),
    }
    .expect("an RSA private key");
    let header = URL_SAFE_NO_PAD.encode(json!({"alg": "RS256", "typ": "JWT"}).to_string());
    let claims = URL_SAFE_NO_PAD
        .encode(json!({"iat": iat, "exp": exp, "iss": app_id.to_string()}).to_string());
    let signed = format!("{header}.{claims}");
    let mut signature = vec![0; key.public().modulus_len()];
    key.sign(
        &signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signed.as_bytes(),
        &mut signature,
    )
    .expect("RS256 signs");
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature))
}
