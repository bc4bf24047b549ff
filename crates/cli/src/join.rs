//! `bellwether node --join ENDPOINTS`: a new member of a running cluster.
//!
//! The first start asks the cluster to add this member (etcd's MemberAdd,
//! with this member's peer address) and records the answer in
//! `DATA_DIR/joined.toml`: the id the cluster gave it and the members it
//! was told of. Later starts read that file and ask nothing, so a restart
//! never adds the member twice. The member then starts as a learner of the
//! cluster's voters, catches up from the leader, and is promoted by the
//! leader once caught up (unless `--learner`).
//!
//! A member the cluster already lists under this peer URL, but which has
//! not started (etcd lists it without a name), is taken over instead of
//! added again. That is etcd's way of growing a cluster (`etcdctl member
//! add`, then start the new member), and it also finishes a join that
//! crashed between the cluster's answer and the file being written. Only
//! an empty data directory joins, so a member's id never starts again
//! without the state it had.

use anyhow::{bail, Context, Result};
use bellwether_api::etcdserverpb as pb;
use bellwether_api::etcdserverpb::cluster_client::ClusterClient;
use bellwether_core::NodeId;
use bellwether_server::config::{client_tls, ConfigLayer};
use bellwether_server::tls::ClientTls;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;
use tonic::transport::ClientTlsConfig;

/// File name of the join record in the data directory.
pub const JOINED_FILE: &str = "joined.toml";

/// How long one endpoint gets to answer MemberAdd.
const JOIN_TIMEOUT: Duration = Duration::from_secs(15);

/// What a joined member remembers of its join.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Joined {
    /// The id the cluster gave this member.
    #[serde(with = "bellwether_server::id_serde::one")]
    pub id: NodeId,
    /// Every member at the time, as `id=host:port` (peer addresses).
    pub peers: Vec<String>,
    /// Their client addresses, as `id=host:port`, where known.
    pub peer_client: Vec<String>,
    /// The voters at the time.
    #[serde(with = "bellwether_server::id_serde::list")]
    pub voters: Vec<NodeId>,
}

fn host_port(url: &str) -> &str {
    url.trim_start_matches("http://")
        .trim_start_matches("https://")
        .trim_end_matches('/')
}

impl Joined {
    /// Sets id, peers and client addresses of `layer` from the join.
    pub fn apply(&self, layer: &mut ConfigLayer) {
        layer.id = Some(self.id.0);
        layer.peers = Some(self.peers.clone());
        layer.peer_client = Some(self.peer_client.clone());
    }
}

/// Reads the join record, asking the cluster at `endpoints` to add this
/// member first if there is none.
pub fn joined(layer: &ConfigLayer, endpoints: &[String], learner: bool) -> Result<Joined> {
    let data_dir = layer.data_dir.as_ref().context("--join needs --data-dir")?;
    let path = data_dir.join(JOINED_FILE);
    if path.exists() {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        return toml::from_str(&text)
            .with_context(|| format!("{} is damaged; restore it or start afresh", path.display()));
    }
    let peer_address = first_join_peer_address(layer, data_dir)?;
    let cluster = layer.cluster.clone().unwrap_or_else(|| "bellwether".into());
    let peer_scheme = if layer.peer_cert_file.is_some() {
        "https"
    } else {
        "http"
    };
    let tls = member_client_tls(layer)?;
    let request = pb::MemberAddRequest {
        peer_urls: vec![format!("{peer_scheme}://{peer_address}")],
        is_learner: learner,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let expected = bellwether_server::etcd::cluster_id(&cluster);
    let response = runtime.block_on(add(endpoints, request, expected, &cluster, tls))?;
    let joined = record_of(&response, peer_address, layer.client_listen.as_deref())?;
    write_durably(data_dir, &path, &toml::to_string(&joined)?)?;
    Ok(joined)
}

/// Checks that a first join may go ahead (an empty data directory, no id
/// or members of its own) and returns the peer address to announce: the
/// cluster dials it, so it must name a real host and port.
fn first_join_peer_address(layer: &ConfigLayer, data_dir: &Path) -> Result<SocketAddr> {
    let holds_data = std::fs::read_dir(data_dir).is_ok_and(|mut entries| entries.next().is_some());
    if holds_data {
        bail!(
            "--join needs an empty --data-dir, and {} holds data but no {JOINED_FILE}: \
             it is another member's, or its join record was lost",
            data_dir.display()
        );
    }
    if layer.id.is_some() || layer.peers.is_some() {
        bail!("--join takes the id and members from the cluster: drop --id and --peers");
    }
    let peer_listen = layer
        .peer_listen
        .as_deref()
        .context("--join needs --peer-listen: the address other members reach this one at")?;
    let peer_address: SocketAddr = peer_listen
        .parse()
        .with_context(|| format!("--peer-listen {peer_listen:?} is not host:port"))?;
    if peer_address.port() == 0 || peer_address.ip().is_unspecified() {
        bail!("--peer-listen {peer_listen} must name the host and port other members dial");
    }
    Ok(peer_address)
}

/// The join record from the cluster's MemberAdd answer: this member's id,
/// every member's peer and client address and the voters besides this
/// one. This member's own addresses come from its flags (`peer_address`,
/// `client_listen`), not from what the cluster lists.
fn record_of(
    response: &pb::MemberAddResponse,
    peer_address: SocketAddr,
    client_listen: Option<&str>,
) -> Result<Joined> {
    let id = response
        .member
        .as_ref()
        .context("MemberAdd answered no member")?
        .id;
    let mut joined = Joined {
        id: NodeId(id),
        peers: Vec::new(),
        peer_client: Vec::new(),
        voters: Vec::new(),
    };
    for member in &response.members {
        let peer = if member.id == id {
            peer_address.to_string()
        } else {
            match member.peer_urls.first() {
                Some(url) => host_port(url).to_string(),
                None => continue,
            }
        };
        joined.peers.push(format!("{}={peer}", member.id));
        if let Some(url) = member.client_urls.first() {
            joined
                .peer_client
                .push(format!("{}={}", member.id, host_port(url)));
        }
        if !member.is_learner && member.id != id {
            joined.voters.push(NodeId(member.id));
        }
    }
    if joined.voters.is_empty() {
        bail!(
            "the cluster's answer names no voter besides this member; remove it with `etcdctl member remove {id:x}`"
        );
    }
    if let Some(client) = client_listen {
        joined
            .peer_client
            .retain(|p| !p.starts_with(&format!("{id}=")));
        joined.peer_client.push(format!("{id}={client}"));
    }
    if !joined
        .peers
        .iter()
        .any(|p| p.starts_with(&format!("{id}=")))
    {
        joined.peers.push(format!("{id}={peer_address}"));
    }
    Ok(joined)
}

/// How a member with client TLS calls another member's client port: over
/// TLS, trusting `trusted_ca_file` and presenting its own certificate, as
/// the members of a running cluster call each other. `None` without TLS.
pub fn member_client_tls(layer: &ConfigLayer) -> Result<Option<ClientTlsConfig>> {
    let Some(files) = client_tls(layer).map_err(|e| anyhow::anyhow!("{e}"))? else {
        return Ok(None);
    };
    let tls = ClientTls::load(&files).map_err(anyhow::Error::msg)?;
    Ok(Some(tls.member_client))
}

/// A connection to the client port at `endpoint`, over TLS with `tls`.
pub async fn member_channel(
    endpoint: &str,
    tls: Option<&ClientTlsConfig>,
) -> Result<tonic::transport::Channel> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{}", host_port(endpoint));
    let mut channel =
        tonic::transport::Endpoint::from_shared(url)?.connect_timeout(Duration::from_secs(2));
    if let Some(tls) = tls {
        channel = channel.tls_config(tls.clone())?;
    }
    Ok(channel.connect().await?)
}

/// Asks each endpoint in turn until one adds the member; first checks, by
/// its member list's cluster id, that the endpoint's cluster is `cluster`
/// (so a wrong `--cluster` adds nothing).
async fn add(
    endpoints: &[String],
    request: pb::MemberAddRequest,
    expected_id: u64,
    cluster: &str,
    tls: Option<ClientTlsConfig>,
) -> Result<pb::MemberAddResponse> {
    let mut errors = Vec::new();
    for endpoint in endpoints {
        let attempt = async {
            let channel = member_channel(endpoint, tls.as_ref()).await?;
            let mut client = ClusterClient::new(channel);
            let list = client
                .member_list(pb::MemberListRequest::default())
                .await?
                .into_inner();
            let cluster_id = list.header.as_ref().map_or(0, |h| h.cluster_id);
            if cluster_id != expected_id {
                bail!(
                    "the cluster at {endpoint} is not named {cluster:?} (its cluster id is {cluster_id:x}); pass its --cluster"
                );
            }
            if let Some(listed) = adoptable(&list, &request.peer_urls)? {
                return anyhow::Ok(listed);
            }
            let response = client.member_add(request.clone()).await?.into_inner();
            anyhow::Ok(response)
        };
        match tokio::time::timeout(JOIN_TIMEOUT, attempt).await {
            Ok(Ok(response)) => return Ok(response),
            Ok(Err(error)) => errors.push(format!("{endpoint}: {error:#}")),
            Err(_) => errors.push(format!("{endpoint}: no answer in {JOIN_TIMEOUT:?}")),
        }
    }
    bail!("no member added this one: {}", errors.join("; "))
}

/// The answer for a member the cluster already lists under `peer_urls`
/// but which has not started (it has no name): it is this one, added
/// earlier by `etcdctl member add` or by a join that crashed. A listed
/// member that has started is another process, or this one's lost data:
/// joining as it would bring its id back without its state.
fn adoptable(
    list: &pb::MemberListResponse,
    peer_urls: &[String],
) -> Result<Option<pb::MemberAddResponse>> {
    let Some(listed) = list
        .members
        .iter()
        .find(|m| m.peer_urls.iter().any(|u| peer_urls.contains(u)))
    else {
        return Ok(None);
    };
    if !listed.name.is_empty() {
        bail!(
            "member {:x} ({}) already uses peer URL {} and has started; if its data is lost, \
             remove it (`etcdctl member remove {:x}`) and join again",
            listed.id,
            listed.name,
            peer_urls.join(","),
            listed.id
        );
    }
    Ok(Some(pb::MemberAddResponse {
        header: list.header,
        member: Some(listed.clone()),
        members: list.members.clone(),
    }))
}

/// Writes `text` to `path` so that it survives a crash: a temporary file,
/// fsynced, renamed, and the directory fsynced.
fn write_durably(dir: &Path, path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let temporary = path.with_extension("toml.tmp");
    let mut file = std::fs::File::create(&temporary)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_join_record_keeps_its_plain_numbers() {
        let joined = Joined {
            id: NodeId(4),
            peers: vec!["1=127.0.0.1:7001".into(), "4=127.0.0.1:7004".into()],
            peer_client: vec!["1=127.0.0.1:7201".into()],
            voters: vec![NodeId(1), NodeId(2)],
        };
        let text = toml::to_string(&joined).unwrap();
        assert_eq!(
            text,
            "id = 4\npeers = [\"1=127.0.0.1:7001\", \"4=127.0.0.1:7004\"]\npeer_client = [\"1=127.0.0.1:7201\"]\nvoters = [1, 2]\n"
        );
        assert_eq!(toml::from_str::<Joined>(&text).unwrap(), joined);
    }
}
