console.log("psync");
