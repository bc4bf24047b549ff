//! The last check of every run, whatever its workload: once healed, the
//! cluster must take a write and raise no alarm. A cluster that stopped
//! taking writes (a CORRUPT or NOSPACE alarm, a member stuck) would
//! otherwise pass every workload's check with nothing acknowledged.

use super::session::REQUEST_TIMEOUT;
use bellwether_api::etcdserverpb as pb;
use bellwether_client::Client;
use std::time::Duration;
use tonic::transport::Channel;

/// How long the healed cluster has to take the last write.
const WRITE_DEADLINE: Duration = Duration::from_secs(10);

/// What is wrong with the healed cluster, if anything.
pub async fn final_health(client: &Client, channels: &[Channel]) -> Option<String> {
    let write = client.put("verify/health", "1");
    if let Err(error) = tokio::time::timeout(WRITE_DEADLINE, write)
        .await
        .map_err(|_| "timed out".to_string())
        .and_then(|answer| answer.map_err(|e| e.to_string()))
    {
        return Some(format!("the healed cluster did not take a write: {error}"));
    }
    let request = pb::AlarmRequest {
        action: pb::alarm_request::AlarmAction::Get as i32,
        member_id: 0,
        alarm: pb::AlarmType::None as i32,
    };
    for channel in channels {
        let mut maintenance = pb::maintenance_client::MaintenanceClient::new(channel.clone());
        let call = maintenance.alarm(request);
        if let Ok(Ok(answer)) = tokio::time::timeout(REQUEST_TIMEOUT, call).await {
            let alarms = answer.into_inner().alarms;
            return (!alarms.is_empty()).then(|| format!("alarms raised: {alarms:?}"));
        }
    }
    Some("no member answered the alarm list".to_string())
}
