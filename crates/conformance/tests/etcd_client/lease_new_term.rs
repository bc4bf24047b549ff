//! Keep-alives at the very start of a leader's term.

use super::{within, Members};

/// A keep-alive sent as soon as the cluster has a leader, to the leader and
/// through a follower, renews the lease. etcd 3.4 never fails a renewal
/// because the leader's lessor is not primary yet: `EtcdServer.LeaseRenew`
/// keeps retrying (forwarding to the leader, 50 ms apart) until the
/// request timeout. A client that does not retry by itself (etcd-client's
/// `lease_keep_alive`) depends on that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_keep_alive_at_the_start_of_a_term() {
    let members = Members::start("conformance-lease-new-term");
    for index in [0, 1] {
        let mut client = members.client(index).await;
        let lease = within(client.lease_grant(30, None))
            .await
            .expect("grant")
            .id();
        let (_keeper, _stream) = within(client.lease_keep_alive(lease))
            .await
            .unwrap_or_else(|error| panic!("keep-alive via member {index}: {error}"));
        let live = within(client.lease_time_to_live(lease, None))
            .await
            .unwrap_or_else(|error| panic!("time to live via member {index}: {error}"));
        assert_eq!(live.id(), lease);
    }
}
